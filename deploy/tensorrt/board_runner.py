#!/usr/bin/env python3
"""Standalone TensorRT runner for a memtrade deployment (the DIR of `explore deploy`).

Runs on the board itself: needs only numpy, tensorrt and the CUDA runtime (libcudart through
ctypes), and runs under Python 3.6 (JetPack 4.6, TensorRT 8.2) as well as 3.11 (TensorRT 10).
Copy this file next to the deployment (explore deploy does) and run:

    python3 board_runner.py build DIR            # engines from the ONNX step models
    python3 board_runner.py run DIR --frames 50 --json
    python3 board_runner.py profile DIR --out profile.json   # needs `deploy --with-profile`

What it does is the executor of deploy/runtime/executor.py on the GPU: one device arena of the
manifest's device size with every buffer at its 256-byte aligned offset; per engine one
execution context without device memory of its own, all of them sharing one scratch region
(per pipeline stage); every step binds arena addresses (TensorRT 8: a bindings list by index
and execute_async_v2; TensorRT 10: set_tensor_address and execute_async_v3).
"""
import argparse
import ctypes
import ctypes.util
import json
import os
import resource
import sys
import threading
import time

import numpy as np

try:
    import tensorrt as trt
except ImportError:  # the module stays importable for `explore` on machines without it
    trt = None

ALIGN = 256
H2D, D2H = 1, 2


def trt_major():
    return int(trt.__version__.split(".")[0]) if trt is not None else 0


# ---- CUDA runtime ------------------------------------------------------------------------

class Cuda(object):
    """The few CUDA runtime calls needed, through ctypes."""

    def __init__(self):
        names = [ctypes.util.find_library("cudart"), "libcudart.so", "libcudart.so.12",
                 "libcudart.so.11.0", "libcudart.so.10.2"]
        self.lib = None
        for name in names:
            if not name:
                continue
            try:
                self.lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
        if self.lib is None:
            raise RuntimeError("libcudart not found (install the CUDA runtime)")
        lib, vp, sz = self.lib, ctypes.c_void_p, ctypes.c_size_t
        lib.cudaMalloc.argtypes = [ctypes.POINTER(vp), sz]
        lib.cudaFree.argtypes = [vp]
        lib.cudaMemcpy.argtypes = [vp, vp, sz, ctypes.c_int]
        lib.cudaMemset.argtypes = [vp, ctypes.c_int, sz]
        lib.cudaStreamCreate.argtypes = [ctypes.POINTER(vp)]
        lib.cudaStreamSynchronize.argtypes = [vp]
        lib.cudaGetErrorString.restype = ctypes.c_char_p
        lib.cudaGetErrorString.argtypes = [ctypes.c_int]

    def check(self, code, what):
        if code != 0:
            msg = self.lib.cudaGetErrorString(code).decode()
            raise RuntimeError("CUDA %s failed: %s" % (what, msg))

    def malloc(self, nbytes):
        ptr = ctypes.c_void_p()
        self.check(self.lib.cudaMalloc(ctypes.byref(ptr), max(int(nbytes), ALIGN)), "cudaMalloc")
        self.check(self.lib.cudaMemset(ptr, 0, max(int(nbytes), ALIGN)), "cudaMemset")
        return ptr.value

    def free(self, ptr):
        self.lib.cudaFree(ctypes.c_void_p(ptr))

    def h2d(self, dst, arr):
        arr = np.ascontiguousarray(arr)
        self.check(self.lib.cudaMemcpy(ctypes.c_void_p(dst), arr.ctypes.data_as(ctypes.c_void_p),
                                       arr.nbytes, H2D), "cudaMemcpy H2D")

    def d2h(self, arr, src):
        self.check(self.lib.cudaMemcpy(arr.ctypes.data_as(ctypes.c_void_p), ctypes.c_void_p(src),
                                       arr.nbytes, D2H), "cudaMemcpy D2H")

    def stream(self):
        s = ctypes.c_void_p()
        self.check(self.lib.cudaStreamCreate(ctypes.byref(s)), "cudaStreamCreate")
        return s.value

    def sync(self, stream):
        self.check(self.lib.cudaStreamSynchronize(ctypes.c_void_p(stream)), "cudaStreamSynchronize")


def _capsule(ptr):
    """A PyCapsule around a device pointer, for bindings that take `void*` as a capsule."""
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ptr, None, None)


# ---- engines -----------------------------------------------------------------------------

def _logger():
    return trt.Logger(trt.Logger.WARNING)


def build_engine(onnx_path, fp16, workspace=1 << 28):
    """Serialized engine (bytes) of one ONNX file; fp16 kernels allowed when asked."""
    logger = _logger()
    builder = trt.Builder(logger)
    if trt_major() >= 10:
        network = builder.create_network(0)   # explicit batch is the only mode
    else:
        flag = 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
        network = builder.create_network(flag)
    parser = trt.OnnxParser(network, logger)
    with open(onnx_path, "rb") as f:
        if not parser.parse(f.read()):
            errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
            raise RuntimeError("%s: ONNX parser: %s" % (onnx_path, "; ".join(errors)))
    config = builder.create_builder_config()
    if hasattr(config, "set_memory_pool_limit"):      # TensorRT >= 8.4
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace)
    else:                                             # TensorRT 8.2
        config.max_workspace_size = workspace
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise RuntimeError("%s: TensorRT could not build an engine" % onnx_path)
    return bytes(plan)


def engine_path(deploy_dir, model_rel):
    return os.path.join(deploy_dir, "engines", model_rel[:-len(".onnx")] + ".engine")


def build_all(deploy_dir, manifest=None, fp16=None, verbose=False):
    """Build (or keep) an engine for every step model and the reference models."""
    manifest = manifest or load_manifest(deploy_dir)
    if fp16 is None:
        fp16 = manifest["precision"] in ("fp16", "mixed")
    rels = list(manifest["models"])
    rels += [c["reference"] for c in manifest["cnns"].values() if c.get("reference")]
    rels += [p["model"] for p in manifest.get("profile", [])]
    built = 0
    for rel in rels:
        out = engine_path(deploy_dir, rel)
        if os.path.isfile(out) and os.path.getmtime(out) >= os.path.getmtime(os.path.join(deploy_dir, rel)):
            continue
        if not os.path.isdir(os.path.dirname(out)):
            os.makedirs(os.path.dirname(out))
        data = build_engine(os.path.join(deploy_dir, rel), fp16)
        with open(out, "wb") as f:
            f.write(data)
        built += 1
        if verbose:
            print("built " + out, file=sys.stderr)
    return built


class Engine(object):
    """A deserialized engine with one context that owns no device memory."""

    def __init__(self, runtime, path):
        with open(path, "rb") as f:
            self.engine = runtime.deserialize_cuda_engine(f.read())
        if self.engine is None:
            raise RuntimeError("%s: cannot deserialize the engine (built by another TensorRT?)" % path)
        e = self.engine
        if trt_major() >= 10:
            self.names = [e.get_tensor_name(i) for i in range(e.num_io_tensors)]
            size = getattr(e, "device_memory_size_v2", None)
            self.scratch = int(size if size is not None else e.device_memory_size)
        else:
            self.names = [e.get_binding_name(i) for i in range(e.num_bindings)]
            self.scratch = int(e.device_memory_size)
        self.context = None

    def attach(self, scratch_ptr):
        """Create the context on `scratch_ptr` (shared by every engine of one stage)."""
        e = self.engine
        if trt_major() >= 10:
            ctx = e.create_execution_context(trt.ExecutionContextAllocationStrategy.USER_MANAGED)
            if hasattr(ctx, "set_device_memory"):
                _set(lambda p: ctx.set_device_memory(p, self.scratch), scratch_ptr)
            else:
                _set(lambda p: setattr(ctx, "device_memory", p), scratch_ptr)
        else:
            ctx = e.create_execution_context_without_device_memory()
            _set(lambda p: setattr(ctx, "device_memory", p), scratch_ptr)
        self.context = ctx
        return ctx

    def call(self, addresses, stream):
        """A call that runs the engine on {tensor name: device address}."""
        ctx = self.context
        if trt_major() >= 10:
            pairs = [(n, int(addresses[n])) for n in self.names]

            def run():
                for name, ptr in pairs:
                    ctx.set_tensor_address(name, ptr)
                if not ctx.execute_async_v3(stream_handle=stream):
                    raise RuntimeError("execute_async_v3 failed")
            return run
        bindings = [int(addresses[n]) for n in self.names]

        def run_v2():
            if not ctx.execute_async_v2(bindings=bindings, stream_handle=stream):
                raise RuntimeError("execute_async_v2 failed")
        return run_v2


def _set(setter, ptr):
    try:
        setter(ptr)
    except TypeError:        # bindings that want a capsule for void*
        setter(_capsule(ptr))


# ---- the executor on the GPU -------------------------------------------------------------

def load_manifest(deploy_dir):
    with open(os.path.join(deploy_dir, "manifest.json")) as f:
        manifest = json.load(f)
    if manifest.get("format") != "memtrade-deployment":
        raise SystemExit("%s: not a memtrade deployment" % deploy_dir)
    return manifest


def _stored(shape, layout, slots=None):
    n, c, h, w = shape
    return [n, c, h, w] if layout == "nchw" else [slots or h, n, c, w]


class Board(object):
    """Device arena, consts, outputs and prebound step calls of a deployment."""

    def __init__(self, deploy_dir, manifest):
        self.cuda = Cuda()
        self.dir, self.m = deploy_dir, manifest
        self.dtype = np.dtype(manifest["dtype"])
        self.runtime = trt.Runtime(_logger())
        self.arena = self.cuda.malloc(manifest["device_arena_bytes"])
        self.engines = {}
        for rel in manifest["models"]:
            self.engines[rel] = Engine(self.runtime, engine_path(deploy_dir, rel))
        self.scratch_size = max([e.scratch for e in self.engines.values()] + [ALIGN])
        self.cnns = {}
        self.allocated = manifest["device_arena_bytes"]
        sinks = {}
        for name, info in manifest["cnns"].items():
            outs = []
            for parity in (0, 1):
                row = []
                for o in info["outputs"]:
                    host = np.zeros(_stored(o["shape"], o["layout"]), self.dtype)
                    row.append((self.cuda.malloc(host.nbytes), host, o["layout"]))
                    sinks[(name, o["layer"], parity)] = row[-1]
                outs.append(row)
            groups = [g for g in manifest["pipelines"] if set(g) & set(info["partitions"])]
            self.cnns[name] = {"outputs": outs, "stages": [], "calls": 0,
                               "pipelined": len(info["partitions"]) > 1 and len(groups) == 1,
                               "shape": info["inputs"][0]["shape"]}
        # one stream and one scratch region per stage (stages of a pipeline run together);
        # a context is bound to one scratch, so each stage attaches its own engines' copies
        shared_scratch = self.cuda.malloc(self.scratch_size)
        for part in manifest["partitions"]:
            run = self.cnns[part["cnn"]]
            stream = self.cuda.stream()
            scratch = self.cuda.malloc(self.scratch_size) if run["pipelined"] else shared_scratch
            used = {}
            for rel in set(s["model"] for s in part["steps"] if s["model"]):
                eng = self.engines[rel] if not run["pipelined"] else Engine(
                    self.runtime, engine_path(deploy_dir, rel))
                eng.attach(scratch)
                used[rel] = eng
            calls = ([], [])
            for step in part["steps"]:
                for parity in (0, 1):
                    calls[parity].append(self._bind(step, parity, part["cnn"], used, stream, sinks))
            run["stages"].append({"name": part["name"], "calls": calls, "stream": stream})
        self.frame = threading.local()

    def _edge_ptr(self, edge, slot=0):
        e = self.m["edges"][edge]
        return self.arena + e["device_offset"] + slot * e["row_bytes"]

    def _bind(self, step, parity, cnn, engines, stream, sinks):
        if step["model"] is None:      # the Input layer: the frame into its edges
            targets = [(self._edge_ptr(b["edges"][parity]), self.m["edges"][b["edges"][parity]]["layout"])
                       for b in step["bind"]]
            cuda, dtype, local = self.cuda, self.dtype, self.frame

            def copy_frame():
                for ptr, layout in targets:
                    frame = local.frame.transpose(2, 0, 1, 3) if layout == "hncw" else local.frame
                    cuda.h2d(ptr, frame.astype(dtype))
            return copy_frame
        addresses = {}
        for b in step["bind"]:
            if b["kind"] == "const":
                arr = np.asarray(b["values"], np.int32)
                ptr = self.cuda.malloc(arr.nbytes)
                self.allocated += -(-arr.nbytes // ALIGN) * ALIGN
                self.cuda.h2d(ptr, arr)
                addresses[b["name"]] = ptr
            elif b["kind"] == "output":
                ptr, host, layout = sinks[(cnn, b["layer"], parity)]
                row = host.nbytes // host.shape[0] if layout == "hncw" else 0
                addresses[b["name"]] = ptr + b["slot"] * row
            else:
                addresses[b["name"]] = self._edge_ptr(b["edges"][parity], b["slot"])
        return engines[step["model"]].call(addresses, stream)

    def run_stream(self, cnn, frames, keep=True):
        run = self.cnns[cnn]
        results = [None] * len(frames)
        stages = run["stages"]
        if not run["pipelined"]:
            for f, frame in enumerate(frames):
                self.frame.frame = frame
                for st in stages:
                    for call in st["calls"][f % 2]:
                        call()
                    run["calls"] += len(st["calls"][f % 2])
                    self.cuda.sync(st["stream"])
                if keep:
                    results[f] = self._collect(run, f % 2)
            return results
        done = [[threading.Event() for _ in frames] for _ in stages]
        errors = []
        counts = [0] * len(stages)

        def stage(k):
            try:
                for f in range(len(frames)):
                    if k > 0:
                        done[k - 1][f].wait()
                    if f >= 2 and k + 1 < len(stages):
                        done[-1][f - 2].wait()
                    if errors:
                        return
                    self.frame.frame = frames[f]
                    calls = stages[k]["calls"][f % 2]
                    for call in calls:
                        call()
                    counts[k] += len(calls)
                    self.cuda.sync(stages[k]["stream"])
                    if k == len(stages) - 1 and keep:
                        results[f] = self._collect(run, f % 2)
                    done[k][f].set()
            except Exception as err:
                errors.append(err)
                for evs in done:
                    for ev in evs:
                        ev.set()
        threads = [threading.Thread(target=stage, args=(k,)) for k in range(len(stages))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        run["calls"] += sum(counts)
        if errors:
            raise errors[0]
        return results

    def _collect(self, run, parity):
        out = []
        for ptr, host, layout in run["outputs"][parity]:
            self.cuda.d2h(host, ptr)
            arr = host.transpose(1, 2, 0, 3) if layout == "hncw" else host
            out.append(arr.astype(np.float32))
        return out

    def param_bytes(self):
        """Weights the engines hold: serialized engine sizes are the closest public figure."""
        total = 0
        for rel in self.m["models"]:
            total += os.path.getsize(engine_path(self.dir, rel))
        return total


def _reference(cuda, runtime, path, frame):
    eng = Engine(runtime, path)
    scratch = cuda.malloc(max(eng.scratch, ALIGN))
    eng.attach(scratch)
    stream = cuda.stream()
    addresses, outs = {}, []
    for name in eng.names:
        if trt_major() >= 10:
            shape = list(eng.engine.get_tensor_shape(name))
            is_input = eng.engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
            dtype = trt.nptype(eng.engine.get_tensor_dtype(name))
        else:
            idx = eng.engine.get_binding_index(name)
            shape = list(eng.engine.get_binding_shape(idx))
            is_input = eng.engine.binding_is_input(idx)
            dtype = trt.nptype(eng.engine.get_binding_dtype(idx))
        host = np.zeros(shape, dtype)
        ptr = cuda.malloc(host.nbytes)
        addresses[name] = ptr
        if is_input:
            cuda.h2d(ptr, frame.reshape(shape).astype(dtype))
        else:
            outs.append((ptr, host))
    call = eng.call(addresses, stream)

    def run(new_frame):
        for name in eng.names[:1]:
            cuda.h2d(addresses[name], new_frame.astype(np.float32))
        call()
        cuda.sync(stream)
        res = []
        for ptr, host in outs:
            cuda.d2h(host, ptr)
            res.append(host.astype(np.float32))
        return res
    return run


class Cycle(object):
    """`count` frames taken in turn from a few distinct ones (`pool`): the input a run feeds
    costs the process a few frames, not `count` of them, so the peak RSS it reports is the
    deployment's (the CPU executor's runs cycle a pool the same way)."""

    def __init__(self, pool, count):
        self.pool, self.count = list(pool), int(count)

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        if isinstance(i, slice):      # the same arrays, no copies
            return [self[j] for j in range(*i.indices(self.count))]
        if i < 0:
            i += self.count
        if not 0 <= i < self.count:
            raise IndexError(i)
        return self.pool[i % len(self.pool)]


def input_frames(manifest, frames, seed=0, pool=4):
    """{cnn: Cycle}: max(frames, CNNs) frames dealt to the CNNs in turn (a multi-CNN app
    runs one CNN per frame), each CNN's drawn from at most `pool` random frames."""
    rng = np.random.RandomState(seed)
    names = list(manifest["cnns"])
    total = max(frames, len(names))
    out = {}
    for j, n in enumerate(names):
        count = len(range(j, total, len(names)))
        shape = manifest["cnns"][n]["inputs"][0]["shape"]
        out[n] = Cycle([rng.standard_normal(shape).astype(np.float32)
                        for _ in range(min(pool, count))], count)
    return out


def measure(deploy_dir, frames=20, seed=0, warmup=3, check=True):
    m = load_manifest(deploy_dir)
    board = Board(deploy_dir, m)
    fps, calls, diff, ref_fps = {}, {}, {}, {}
    for n, stream in input_frames(m, frames, seed).items():
        board.run_stream(n, Cycle(stream.pool, warmup), keep=False)
        board.cnns[n]["calls"] = 0
        start = time.perf_counter()
        outs = board.run_stream(n, stream)
        fps[n] = len(stream) / (time.perf_counter() - start)
        calls[n] = board.cnns[n]["calls"] // len(stream)
        ref = m["cnns"][n].get("reference")
        if check and ref:
            run_ref = _reference(board.cuda, board.runtime, engine_path(deploy_dir, ref), stream[0])
            worst = 0.0
            for frame, got in zip(stream, outs):
                for g, w in zip(got, run_ref(frame)):
                    worst = max(worst, float(np.max(np.abs(g - w.reshape(g.shape)))))
            diff[n] = worst
            for frame in stream[:warmup]:
                run_ref(frame)
            start = time.perf_counter()
            for frame in stream:
                run_ref(frame)
            ref_fps[n] = len(stream) / (time.perf_counter() - start)
        else:
            diff[n] = None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"fps": fps, "arena_bytes": m["device_arena_bytes"], "param_bytes": board.param_bytes(),
            "max_abs_diff": diff, "calls_per_frame": calls, "peak_rss_bytes": peak,
            "reference_fps": ref_fps, "device_bytes": board.allocated, "backend": "tensorrt",
            "tensorrt": trt.__version__}


def profile(deploy_dir, repeats=50):
    """Per-layer times with TensorRT (the manifest's `profile` models), in the
    memtrade-profile format: {models: {cnn: {layer: {whole_ms, part_ms, phases}}}}."""
    m = load_manifest(deploy_dir)
    if not m.get("profile"):
        raise SystemExit("%s: no profile models; deploy with `explore deploy --with-profile`" % deploy_dir)
    cuda, runtime = Cuda(), trt.Runtime(_logger())
    stream = cuda.stream()
    tables = {}
    for entry in m["profile"]:
        eng = Engine(runtime, engine_path(deploy_dir, entry["model"]))
        eng.attach(cuda.malloc(max(eng.scratch, ALIGN)))
        addresses = {}
        for port in entry["ports"]:
            arr = np.asarray(port["values"], np.int32) if "values" in port else \
                np.random.RandomState(0).standard_normal(port["shape"]).astype(port["dtype"])
            addresses[port["name"]] = cuda.malloc(arr.nbytes)
            cuda.h2d(addresses[port["name"]], arr)
        call = eng.call(addresses, stream)
        for _ in range(3):
            call()
        cuda.sync(stream)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            cuda.sync(stream)
            times.append(time.perf_counter() - start)
        ms = float(np.median(times)) * 1e3
        row = tables.setdefault(entry["cnn"], {}).setdefault(entry["layer"], {})
        if entry["kind"] == "whole":
            row["whole_ms"] = ms
        else:
            row["part_ms"], row["phases"] = ms, entry["phases"]
    for table in tables.values():
        for layer, row in list(table.items()):
            if "whole_ms" not in row:
                row["whole_ms"] = row.get("part_ms", 0.0) * row.get("phases", 1)
    return {"format": "memtrade-profile", "version": 1, "name": "tensorrt-" + trt.__version__,
            "precision": m["precision"], "models": tables,
            "meta": {"backend": "tensorrt", "tensorrt": trt.__version__, "repeats": repeats,
                     "how": "median ms of one call, stream synchronised (board_runner.py)"}}


def main(argv=None):
    parser = argparse.ArgumentParser(description="run a memtrade deployment with TensorRT")
    sub = parser.add_subparsers(dest="cmd")
    b = sub.add_parser("build")
    b.add_argument("dir")
    b.add_argument("--fp16", action="store_true", default=None)
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--frames", type=int, default=20)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--json", action="store_true")
    p = sub.add_parser("profile")
    p.add_argument("dir")
    p.add_argument("--out", default="profile-tensorrt.json")
    p.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args(argv)
    if trt is None:
        print("board_runner: the tensorrt package is not installed", file=sys.stderr)
        return 2
    if args.cmd == "build":
        print("built %d engines" % build_all(args.dir, fp16=args.fp16, verbose=True))
    elif args.cmd == "run":
        build_all(args.dir)
        res = measure(args.dir, args.frames, args.seed)
        if args.json:
            print(json.dumps(res))
        else:
            for n, v in res["fps"].items():
                print("%s: %.1f fps (plain engine %.1f), %s calls/frame, max |diff| %s"
                      % (n, v, res["reference_fps"].get(n, float("nan")), res["calls_per_frame"][n],
                         res["max_abs_diff"][n]))
            print("device arena %d B, device bytes %d, engines %d B, peak RSS %d B"
                  % (res["arena_bytes"], res["device_bytes"], res["param_bytes"], res["peak_rss_bytes"]))
    elif args.cmd == "profile":
        build_all(args.dir)
        with open(args.out, "w") as f:
            json.dump(profile(args.dir, args.repeats), f, indent=1)
        print("wrote " + args.out)
    else:
        parser.print_help()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

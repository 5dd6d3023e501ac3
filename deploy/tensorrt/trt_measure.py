"""What `board_runner.py run` and `profile` measure: the input frames (a few distinct ones
cycled), frames per second, calls per frame, the largest difference from the plain reference
engine and peak memory of a deployment; and per-layer times of the profile models.

Part of the standalone runner (board_runner.py and its trt_*.py modules, copied beside a
deployment): Python 3.6 compatible, imports nothing of memtrade.
"""
import resource
import time

import numpy as np

try:
    from .trt_board import Board, reference_engine
except ImportError:  # run as a script: the modules lie flat in DIR
    from trt_board import Board, reference_engine
try:
    from .trt_cuda import ALIGN, Cuda, trt, trt_logger
except ImportError:  # run as a script: the modules lie flat in DIR
    from trt_cuda import ALIGN, Cuda, trt, trt_logger
try:
    from .trt_engines import Engine, engine_path, load_manifest
except ImportError:  # run as a script: the modules lie flat in DIR
    from trt_engines import Engine, engine_path, load_manifest


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


def input_frames(shapes, frames, seed=0, pool=4):
    """{cnn: Cycle}: max(frames, CNNs) frames dealt to the CNNs in turn (a multi-CNN app
    runs one CNN per frame; `shapes`: {cnn: its input's NCHW shape}, in the manifest's
    order), each CNN's drawn from at most `pool` random frames."""
    rng = np.random.RandomState(seed)
    names = list(shapes)
    total = max(frames, len(names))
    out = {}
    for j, n in enumerate(names):
        count = len(range(j, total, len(names)))
        out[n] = Cycle([rng.standard_normal(shapes[n]).astype(np.float32)
                        for _ in range(min(pool, count))], count)
    return out


def input_shapes(manifest):
    """{cnn: the NCHW shape of its (first) input} of a trt_manifest.Manifest."""
    return {n: list(c.inputs[0].shape) for n, c in manifest.cnns.items()}


def measure(deploy_dir, frames=20, seed=0, warmup=3, check=True):
    m = load_manifest(deploy_dir)
    board = Board(deploy_dir, m)
    fps, calls, diff, ref_fps = {}, {}, {}, {}
    for n, stream in input_frames(input_shapes(m), frames, seed).items():
        board.run_stream(n, Cycle(stream.pool, warmup), keep=False)
        board.cnns[n].calls = 0
        start = time.perf_counter()
        outs = board.run_stream(n, stream)
        fps[n] = len(stream) / (time.perf_counter() - start)
        calls[n] = board.cnns[n].calls // len(stream)
        ref = m.cnns[n].reference
        if check and ref:
            run_ref = reference_engine(board.cuda, board.runtime, engine_path(deploy_dir, ref), stream[0])
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
    return {"fps": fps, "arena_bytes": m.device_arena_bytes, "param_bytes": board.param_bytes(),
            "max_abs_diff": diff, "calls_per_frame": calls, "peak_rss_bytes": peak,
            "reference_fps": ref_fps, "device_bytes": board.allocated, "backend": "tensorrt",
            "tensorrt": trt.__version__}


def profile(deploy_dir, repeats=50):
    """Per-layer times with TensorRT (the manifest's `profile` models), in the
    memtrade-profile format: {models: {cnn: {layer: {whole_ms, part_ms, phases}}}}."""
    m = load_manifest(deploy_dir)
    if not m.profile:
        raise SystemExit("%s: no profile models; deploy with `explore deploy --with-profile`" % deploy_dir)
    cuda, runtime = Cuda(), trt.Runtime(trt_logger())
    stream = cuda.stream()
    tables = {}
    for entry in m.profile:
        eng = Engine(runtime, engine_path(deploy_dir, entry.model))
        eng.attach(cuda.malloc(max(eng.scratch, ALIGN)))
        addresses = {}
        for port in entry.ports:
            arr = np.asarray(port.values, np.int32) if port.values is not None else \
                np.random.RandomState(0).standard_normal(port.shape).astype(port.dtype)
            addresses[port.name] = cuda.malloc(arr.nbytes)
            cuda.h2d(addresses[port.name], arr)
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
        row = tables.setdefault(entry.cnn, {}).setdefault(entry.layer, {})
        if entry.kind == "whole":
            row["whole_ms"] = ms
        else:
            row["part_ms"], row["phases"] = ms, entry.phases
    for table in tables.values():
        for layer, row in list(table.items()):
            if "whole_ms" not in row:
                row["whole_ms"] = row.get("part_ms", 0.0) * row.get("phases", 1)
    return {"format": "memtrade-profile", "version": 1, "name": "tensorrt-" + trt.__version__,
            "precision": m.precision, "models": tables,
            "meta": {"backend": "tensorrt", "tensorrt": trt.__version__, "repeats": repeats,
                     "how": "median ms of one call, stream synchronised (board_runner.py)"}}

"""How much of a by-parts deployment's time is moving rows between the rings' layout and the
kernels' (issue 27): an upper bound on what any ring layout could give back.

    python benchmarks/layout_bound.py DEPLOY_DIR [--threads 1] [--reps 200] [--frames 200]

A ring stores a tensor's rows outermost ([slots, N, C, W]: a row is one contiguous slot, so
a step can write it as a bound view), while ONNX Runtime's Conv reads and writes NCHW. So
every by-parts step model gathers its window's rows (Gather), moves them to NCHW
(Transpose) and moves its output rows back (Transpose). Four figures, each from its own
process:
  - plain ONNX Runtime on the deployment's reference model (median frame);
  - the deployment as `explore run` runs it (the executor, shared pool, median frame);
  - every step model alone (ORT_ENABLE_ALL, `--reps` runs each, median), summed over the
    frame's steps, as built;
  - the same with the ring Gathers and the layout Transposes removed: each such input
    declared in the layout its first compute node reads, each output in the layout its
    last compute node writes. Nothing can be cheaper on these kernels however the rings
    lie, so `x plain` of this line bounds what a new ring layout can reach.
The step sums leave out what a frame adds between calls (the executor, caches the next
step finds cold), which the deployment's line includes.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def without_layout_ops(model):
    """`model` with its ring Gathers and the row <-> NCHW Transposes at its ports removed."""
    import onnx
    from onnx import helper, shape_inference
    model = shape_inference.infer_shapes(model)
    g = model.graph
    info = {v.name: v for v in [*g.value_info, *g.input, *g.output]}
    readers = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            readers[i].append(n)
    producer = {o: n for n in g.node for o in n.output}
    graph_inputs = {i.name for i in g.input}
    dropped: set[int] = set()
    new_inputs = []

    def port(name: str):
        t = info[name].type.tensor_type
        return helper.make_tensor_value_info(name, t.elem_type, [d.dim_value for d in t.shape.dim])

    for n in g.node:
        if n.op_type == "Gather" and n.input[0] in graph_inputs:
            after = readers[n.output[0]]
            if len(after) == 1 and after[0].op_type == "Transpose":
                dropped |= {id(n), id(after[0])}
                new_inputs.append(port(after[0].output[0]))
            else:
                dropped.add(id(n))
                new_inputs.append(port(n.output[0]))
        elif n.op_type == "Transpose" and n.input[0] in graph_inputs:
            dropped.add(id(n))
            new_inputs.append(port(n.output[0]))
    outputs = []
    for o in g.output:
        last = producer[o.name]
        moved = producer.get(last.input[0]) if last.op_type == "Identity" else None
        if moved is not None and moved.op_type == "Transpose":
            dropped.add(id(last))
            if len(readers[moved.output[0]]) == 1:
                dropped.add(id(moved))
            outputs.append(port(moved.input[0]))
        else:
            outputs.append(o)
    nodes = [n for n in g.node if id(n) not in dropped]
    used = {i for n in nodes for i in n.input} | {o.name for o in outputs}
    inputs = [i for i in g.input if i.name in used] + new_inputs
    out = helper.make_model(helper.make_graph(nodes, g.name, inputs, outputs, g.initializer),
                            opset_imports=model.opset_import)
    out.ir_version = model.ir_version
    onnx.checker.check_model(out)
    return out


def time_alone(model, threads: int, reps: int) -> float:
    """Median ms of one run of `model` with I/O bound to arrays of its declared shapes."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    binding, held = sess.io_binding(), []
    rng = np.random.default_rng(0)
    for i in sess.get_inputs():
        x = (np.zeros(i.shape, np.int32) if i.type == "tensor(int32)"      # slot indices
             else rng.standard_normal(i.shape).astype(np.float32))
        held.append(x)
        binding.bind_cpu_input(i.name, x)
    for o in sess.get_outputs():
        y = np.zeros(o.shape, np.float32)
        held.append(y)
        binding.bind_output(o.name, "cpu", 0, np.float32, list(y.shape), y.ctypes.data)
    run, handle = sess._sess.run_with_iobinding, binding._iobinding
    for _ in range(max(3, reps // 10)):
        run(handle, None)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run(handle, None)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def steps_alone(folder: Path, threads: int, reps: int) -> dict:
    import onnx
    manifest = json.loads((folder / "manifest.json").read_text())
    if manifest["dtype"] != "float32":
        raise SystemExit(f"{folder}: the bound is measured on fp32 deployments")
    uses = collections.Counter(s["model"] for p in manifest["partitions"] for s in p["steps"]
                               if s.get("model"))
    built = moved = 0.0
    nodes = [0, 0]
    for path, count in sorted(uses.items()):
        model = onnx.load(str(folder / path))
        t = time_alone(model, threads, reps)
        built += t * count
        nodes[0] += len(model.graph.node) * count
        if ".whole." not in path:
            model = without_layout_ops(model)
            t = time_alone(model, threads, reps)
        moved += t * count
        nodes[1] += len(model.graph.node) * count
    return {"built_ms": built, "bound_ms": moved, "built_nodes": nodes[0], "bound_nodes": nodes[1]}


def plain(folder: Path, threads: int, frames: int) -> dict:
    import onnxruntime as ort
    manifest = json.loads((folder / "manifest.json").read_text())
    cnn = next(iter(manifest["cnns"]))
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(str(folder / "reference" / f"{cnn}.onnx"), opts,
                                providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: np.random.default_rng(0).standard_normal(
        manifest["cnns"][cnn]["inputs"][0]["shape"]).astype(np.float32)}
    for _ in range(5):
        sess.run(None, feed)
    times = []
    for _ in range(frames):
        start = time.perf_counter()
        sess.run(None, feed)
        times.append(time.perf_counter() - start)
    return {"ms": float(np.median(times)) * 1e3}


def deployed(folder: Path, threads: int, frames: int) -> dict:
    from deploy.run.measure import measure
    out = measure(folder, frames=frames, threads=threads, check=False, shared_pool=True,
                  layout="blocked")
    return {"ms": next(iter(out["frame_ms_median"].values())),
            "calls": next(iter(out["calls_per_frame"].values()))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("deployment", type=Path)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--part", choices=["plain", "deployed", "alone"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.part:
        run = {"plain": lambda: plain(args.deployment, args.threads, args.frames),
               "deployed": lambda: deployed(args.deployment, args.threads, args.frames),
               "alone": lambda: steps_alone(args.deployment, args.threads, args.reps)}
        print(json.dumps(run[args.part]()))
        return
    print(f"{args.deployment}, {args.threads} thread(s); load {os.getloadavg()[0]:.2f} at start")
    got = {}
    for part in ("plain", "deployed", "alone"):
        cmd = [sys.executable, __file__, str(args.deployment), "--threads", str(args.threads),
               "--reps", str(args.reps), "--frames", str(args.frames), "--part", part]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{part}: {done.stderr.strip().splitlines()[-1]}")
        got[part] = json.loads(done.stdout.strip().splitlines()[-1])
    base = got["plain"]["ms"]
    alone = got["alone"]
    rows = [("plain ONNX Runtime", base, ""),
            ("deployment (explore run)", got["deployed"]["ms"], f"{got['deployed']['calls']} calls"),
            ("step models alone, as built", alone["built_ms"], f"{alone['built_nodes']} nodes"),
            ("... without layout moves", alone["bound_ms"], f"{alone['bound_nodes']} nodes")]
    for label, ms, extra in rows:
        print(f"  {label:30s} {ms:8.3f} ms/frame  {base / ms:5.2f}x plain  {extra}")
    print(f"load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()

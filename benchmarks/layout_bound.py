"""How much of a by-parts deployment's time is moving rows between the rings' layout and the
kernels': a bound on what any ring layout could give back.

    python benchmarks/layout_bound.py DEPLOY_DIR [--threads 1] [--reps 200] [--frames 200]

A ring stores a tensor's rows outermost ([slots, N, C, W], or row-blocked [slots, N, C/b,
W, b]: a row is one contiguous slot, so a step writes it as a bound view), while ONNX
Runtime's kernels read and write NCHW(c). So a by-parts step gathers its window's rows
(Gather), moves them to the kernel's layout (Transpose) and moves its output rows back
(Transpose). Figures, each part from its own process:
  - plain ONNX Runtime on the deployment's reference model (median frame);
  - the deployment as `explore run` runs it (executor, shared pool, layout "blocked",
    median frame);
  - its step forms alone: the deployment loaded as `explore run` loads it, every session's
    final graph kept (deploy/profile/deployed_forms.FormKeeper) and timed alone (`--reps`
    runs, median), summed over a frame's steps; then the same forms with the ring Gathers
    and the layout Transposes at their ports removed (the new ports in the layout the
    kernels compute in), each checked to compute what the form computes;
  - the deployment less the difference of those two sums: what it would run at if no row
    were moved between layouts at all. No ring layout can do better on these kernels.
Forms alone run hot in cache, so their sums are below the deployment's frame; only their
difference is used.
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


def without_layout_ops(model, run_with):
    """`model` with its ring Gathers and the row <-> kernel-layout Transposes at its ports
    removed; the new ports take the shapes `run_with(names)` (the model run with those
    tensors exposed) gives them. Returns (the model, its new ports' names)."""
    from onnx import helper
    g = model.graph
    readers = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            readers[i].append(n)
    producer = {o: n for n in g.node for o in n.output}
    graph_inputs = {i.name for i in g.input}
    dropped: set[int] = set()
    new_inputs, outputs = [], []
    for n in g.node:
        if n.op_type == "Gather" and n.input[0] in graph_inputs:
            after = readers[n.output[0]]
            if len(after) == 1 and after[0].op_type == "Transpose":
                dropped |= {id(n), id(after[0])}
                new_inputs.append(after[0].output[0])
            else:
                dropped.add(id(n))
                new_inputs.append(n.output[0])
        elif n.op_type == "Transpose" and n.input[0] in graph_inputs:
            dropped.add(id(n))
            new_inputs.append(n.output[0])
    for o in g.output:
        last = producer[o.name]
        moved = producer.get(last.input[0]) if last.op_type == "Identity" else None
        if moved is not None and moved.op_type == "Transpose":
            dropped.add(id(last))
            if len(readers[moved.output[0]]) == 1:
                dropped.add(id(moved))
            outputs.append(moved.input[0])
        else:
            outputs.append(o.name)
    values = run_with(new_inputs + outputs)
    port = lambda name: helper.make_tensor_value_info(name, 1, list(values[name].shape))  # noqa: E731
    nodes = [n for n in g.node if id(n) not in dropped]
    used = {i for n in nodes for i in n.input} | set(outputs)
    inputs = [i for i in g.input if i.name in used] + [port(name) for name in new_inputs]
    out = helper.make_model(helper.make_graph(nodes, g.name, inputs, [port(n) for n in outputs],
                                              g.initializer),
                            opset_imports=model.opset_import)
    out.ir_version = model.ir_version
    return out, new_inputs


def _session(model, threads: int):
    """A session as OrtBackend makes a deployed form's (the process's shared pool)."""
    import onnxruntime as ort
    from deploy.ort.process import form_options
    return ort.InferenceSession(model.SerializeToString(), form_options(threads, True),
                                providers=["CPUExecutionProvider"])


def _feed(model) -> dict[str, np.ndarray]:
    """Seeded inputs at the declared shapes; int32 ones (slot indices, row masks) in range."""
    rng, feed = np.random.default_rng(1), {}
    dims = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    for i in model.graph.input:
        if i.type.tensor_type.elem_type == 6:
            rows = dims.get(i.name[:-len("_idx")], [2])[0] if i.name.endswith("_idx") else 2
            feed[i.name] = (np.arange(int(np.prod(dims[i.name]))) % rows).astype(np.int32).reshape(dims[i.name])
        else:
            feed[i.name] = rng.standard_normal(dims[i.name]).astype(np.float32)
    return feed


def bound_form(model, threads: int, label: str):
    """`model` without its layout moves, checked to compute what `model` computes: the
    tensors at the new ports, taken from `model`'s own run, go in, and what comes out must
    be the tensors `model` had there."""
    from onnx import helper
    feed = _feed(model)
    seen: dict[str, np.ndarray] = {}

    def run_with(names):
        exposed = onnx_copy(model)
        have = {o.name for o in exposed.graph.output}
        exposed.graph.output.extend(helper.make_tensor_value_info(n, 1, None)
                                    for n in names if n not in have)
        sess = _session(exposed, threads)
        seen.update(zip([o.name for o in sess.get_outputs()], sess.run(None, feed)))
        return seen
    bound, new = without_layout_ops(model, run_with)
    sess = _session(bound, threads)
    ins = {i.name: (seen[i.name] if i.name in new else feed[i.name]) for i in bound.graph.input}
    for o, y in zip(sess.get_outputs(), sess.run(None, ins)):
        if not np.allclose(y, seen[o.name], rtol=1e-5, atol=1e-5):
            raise SystemExit(f"{label}: without layout moves, {o.name} differs "
                             f"(max |diff| {np.abs(y - seen[o.name]).max():.3g})")
    return bound


def onnx_copy(model):
    import onnx
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def time_alone(model, threads: int, reps: int) -> float:
    """Median ms of one run of `model` (a deployed form) with I/O bound to arrays."""
    sess = _session(model, threads)
    binding, held = sess.io_binding(), []
    for name, x in _feed(model).items():
        held.append(x)
        binding.bind_cpu_input(name, x)
    for o in sess.get_outputs():
        y = np.zeros(o.shape, np.float32)
        held.append(y)
        binding.bind_output(o.name, "cpu", 0, np.float32, list(y.shape), y.ctypes.data)
    run, handle = sess._sess.run_with_iobinding, binding._iobinding
    from deploy.profile.layers import median_ms
    return median_ms(lambda: run(handle, None), reps, max(3, reps // 10))


def steps_alone(folder: Path, threads: int, reps: int) -> dict:
    """Load the deployment as `explore run` does, keep every session's final form
    (deploy/profile/deployed_forms.FormKeeper), and time each alone, as built and bound."""
    import tempfile
    import onnx
    from deploy.ort.backend import OrtBackend
    from deploy.ort.process import init_runtime
    from deploy.profile.deployed_forms import FormKeeper
    from deploy.runtime import executor, manifest as mf
    manifest = mf.load(folder)
    if manifest.dtype != "float32":
        raise SystemExit(f"{folder}: the bound is measured on fp32 deployments")
    init_runtime(threads, True, manifest.plan_workspace_bytes or 0)
    backend = OrtBackend(manifest.dtype, threads, True, "blocked")
    with tempfile.TemporaryDirectory() as tmp:
        keeper = backend.on_session = FormKeeper(Path(tmp))
        ex = executor.Executor(manifest, folder, backend)
        uses = collections.Counter(backend.session_key(Path(folder) / s.model)
                                   for _, _, s in manifest.steps() if s.model)
        in_frame = calls_in_frame(ex, manifest, folder, backend)
        built = moved = 0.0
        nodes = [0, 0]
        per_step = []
        for skey, count in sorted(uses.items()):
            model = onnx.load(str(keeper.paths[skey]))
            t = time_alone(model, threads, reps)
            built += t * count
            per_step.append((in_frame.get(skey, 0.0), t * count, count, Path(skey).name))
            nodes[0] += len(model.graph.node) * count
            if ".whole." not in skey:
                model = bound_form(model, threads, skey)
                t = time_alone(model, threads, reps)
            moved += t * count
            nodes[1] += len(model.graph.node) * count
    per_step.sort(key=lambda r: r[1] - r[0])
    return {"built_ms": built, "bound_ms": moved, "built_nodes": nodes[0], "bound_nodes": nodes[1],
            "per_step": per_step[:10]}


def calls_in_frame(ex, manifest, folder: Path, backend, frames: int = 60) -> dict[str, float]:
    """Per session, the medians of its calls' times inside the deployment's frames, summed
    over a frame (each call timed alone; the first 10 frames left out)."""
    cnn = next(iter(ex.cnns))
    run = ex.cnns[cnn]
    steps = [(p, i, s) for p, mp in zip(run.partitions, manifest.partitions)
             for i, s in enumerate(mp.steps)]
    from deploy.runtime import executor
    executor.set_frame(np.random.default_rng(0).standard_normal(
        manifest.cnns[cnn].inputs[0].shape).astype(np.float32))
    times = [[] for _ in steps]
    for _ in range(frames):
        for k, (p, i, _s) in enumerate(steps):
            start = time.perf_counter()
            p.calls[0][i]()
            times[k].append(time.perf_counter() - start)
    out: dict[str, float] = collections.defaultdict(float)
    for k, (_p, _i, s) in enumerate(steps):
        if s.model:
            out[backend.session_key(Path(folder) / s.model)] += float(np.median(times[k][10:])) * 1e3
    return out


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
    if not (args.deployment / "manifest.json").is_file():
        print(f"{args.deployment}: expected a deployment folder (explore deploy's, with "
              "manifest.json)", file=sys.stderr)
        sys.exit(2)
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
    base, dep, alone = got["plain"]["ms"], got["deployed"]["ms"], got["alone"]
    moves = alone["built_ms"] - alone["bound_ms"]
    rows = [("plain ONNX Runtime", base, ""),
            ("deployment (explore run)", dep, f"{got['deployed']['calls']} calls"),
            ("its step forms alone", alone["built_ms"], f"{alone['built_nodes']} nodes"),
            ("... without layout moves", alone["bound_ms"], f"{alone['bound_nodes']} nodes"),
            ("deployment less the moves", dep - moves, f"moves {moves:.3f} ms")]
    for label, ms, extra in rows:
        print(f"  {label:28s} {ms:8.3f} ms/frame  {base / ms:5.2f}x plain  {extra}")
    print("  sessions whose calls take longest in the frame beyond their form alone "
          "(ms per frame: in the frame, alone, calls):")
    for in_frame, alone_ms, count, name in alone["per_step"]:
        print(f"    {in_frame - alone_ms:6.3f}  {in_frame:6.3f} {alone_ms:6.3f} {count:4d}  {name}")
    print(f"load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()

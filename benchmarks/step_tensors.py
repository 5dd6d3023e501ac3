"""Where does a deployment's output part from the model's? One frame through one CNN of the
deployment, step by step; every tensor the deployment holds whole (all its rows in the arena,
rows outermost) is read after the last step that writes it and compared with the same ONNX
tensor (`Layer.output_tensor`, added as a graph output) of the reference model, and of the
same model run with ONNX Runtime's optimizations off (the verdict's second computation,
deploy/run/verdict.py). A deployment error shows as a tensor that lies from the model's
much further than the plain-kernel model's does; rounding, as one that lies about as far.
Prints one line per tensor, in the order the schedule finishes them, and last the worst
ratio of the two distances.

    python benchmarks/step_tensors.py DEPLOY_DIR [--cnn NAME] [--seed 0] [--threads 1]

Only CNNs of one partition whose steps are each one call (no fused tiles).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from csdf.onnx_import import load_onnx  # noqa: E402
from deploy.backends import registry  # noqa: E402
from deploy.ort import process as ort_process  # noqa: E402
from deploy.run.measure import frames_for  # noqa: E402
from deploy.runtime import executor as executor_module  # noqa: E402
from deploy.runtime import manifest as mf  # noqa: E402


def sessions(path: Path, tensors: list[str]) -> list[ort.InferenceSession]:
    """The reference with `tensors` as outputs, optimized and not."""
    model = onnx.load(str(path))
    have = {o.name for o in model.graph.output}
    model.graph.output.extend(onnx.helper.make_tensor_value_info(t, onnx.TensorProto.FLOAT, None)
                              for t in tensors if t not in have)
    out = []
    for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
        opts = ort.SessionOptions()
        opts.graph_optimization_level = level
        opts.use_per_session_threads = False        # the process's one pool
        out.append(ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--cnn")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    manifest = mf.load(args.dir)
    name = args.cnn or next(iter(manifest.cnns))
    info = manifest.cnns[name]
    parts = [p for p in manifest.partitions if p.cnn == name]
    if len(parts) != 1:
        raise SystemExit(f"{name}: {len(parts)} partitions; this runs CNNs of one partition")
    ort_process.init_runtime(args.threads, True)
    from deploy.runtime.executor import Executor
    ex = Executor(manifest, args.dir, registry.backend(manifest.backend).runtime(manifest.dtype, args.threads, True))
    calls, steps = ex.cnns[name].partitions[0].calls[0], parts[0].steps
    if len(calls) != len(steps):
        raise SystemExit(f"{name}: {len(calls)} calls for {len(steps)} steps (fused tiles); not handled")
    path = Path(args.dir) / info.reference
    cnn = load_onnx(path, name, input_shape=list(info.inputs[0].shape))
    tensor_of = {layer.name: layer.output_tensor for layer in cnn.layers() if layer.output_tensor}
    last = {b.edges[0]: i for i, step in enumerate(steps) for b in step.bind
            if b.kind == "edge" and b.writes}
    last_write: dict[int, list[str]] = {}
    for e, i in last.items():
        last_write.setdefault(i, []).append(e)
    whole = {e for e, edge in manifest.edges.items() if edge.whole and edge.layout == "hncw"}
    wanted = sorted({tensor_of[e.split("->")[0].split(".", 1)[1]] for e in whole
                     if e.split("->")[0].split(".", 1)[1] in tensor_of})
    ref, plain = sessions(path, wanted)
    frame = frames_for(manifest, len(manifest.cnns), args.seed)[name][0]
    feed = {ref.get_inputs()[0].name: frame}
    names = [o.name for o in ref.get_outputs()]
    want = dict(zip(names, ref.run(None, feed)))
    other = dict(zip(names, plain.run(None, feed)))
    executor_module.set_frame(frame)
    worst = (0.0, None)
    done: set[str] = set()
    for i, call in enumerate(calls):
        call()
        for e in last_write.get(i, []):
            layer = e.split("->")[0].split(".", 1)[1]
            tensor = tensor_of.get(layer)
            if e not in whole or tensor is None or tensor in done:
                continue
            done.add(tensor)
            got = ex.edge_view(manifest.edges[e], 0, None).transpose(1, 2, 0, 3)
            w = want[tensor].reshape(got.shape)
            d = float(np.max(np.abs(got - w)))
            s = float(np.max(np.abs(other[tensor].reshape(got.shape) - w)))
            ratio = d / s if s else (0.0 if d == 0 else float("inf"))
            print(f"step {i:5d} {layer:32s} {str(list(got.shape)):20s} max |deployed - model| "
                  f"{d:.3g}, |plain - model| {s:.3g} (values up to {float(np.max(np.abs(w))):.3g}): "
                  f"ratio {ratio:.2f}", flush=True)
            if ratio > worst[0]:
                worst = (ratio, layer)
    print(f"{len(done)} whole tensors compared; worst ratio {worst[0]:.2f} ({worst[1]})")


if __name__ == "__main__":
    main()

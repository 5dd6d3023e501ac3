"""ONNX Runtime's offline optimisation of step models, with every initializer written to a
side file, so the session that runs a step parses only the graph and takes its weights from
arrays the deployment owns (deploy/ort/backend.py).

Optimising a model means building a throw-away session on it: ONNX Runtime parses the
weights, copies them into tensors, reorders and pre-packs them, and writes the result. In a
long-lived process that leaves the heap larger by several times the weights (measured on
MobileNetV2: 17 MiB of RSS after optimising its 67 step models, 13 MiB of them weights), so a
whole-process runner (`explore run`) optimises in one child process instead
(`python -m deploy.ort.optimize`, jobs as JSON on stdin; it reports its own peak RSS).
A model ONNX Runtime refuses (a damaged deployment) is reported by the child as JSON and
raised here as `ModelRefused`, one line naming the model file and ORT's reason.

Parameters stored below fp32 (deploy/steps/builder.py) reach the layer through a node that
converts them, and the session must keep such a node: ONNX Runtime 1.31's ConstantFolding
computes any node whose inputs are all constant initializers and stores the result (fp32)
in their place.
- int8 (DequantizeLinear): ConstantFolding skips DequantizeLinear while its QDQ
  optimisations are on (the default; constant_folding.cc), so int8 weights stay int8. The
  NCHWc rewrite needs constant weights to reorder, so such a Conv runs ONNX Runtime's plain
  kernel.
- fp16 (Cast): ONNX Runtime folds the Cast and may reorder the fp32 result into NCHWc
  blocks; `stored_fp16` then stores every such weight in fp16 again behind a Cast of its
  own (exact: the values are fp16 numbers, permuted and zero-padded). The step session loads
  the result without further optimisation (deploy/ort/process.py form_options), so nothing
  folds the Cast again, and the conv keeps the NCHWc kernel: measured on the README's
  MobileNetV2 plan (one thread), plain kernels cost a quarter of the fps.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from deploy.runtime.child import child_env
from sdf3.errors import InputError

FORMS = ("nchwc", "nchw")     # ORT_ENABLE_ALL with, or without, the NCHWc rewrite


class ModelRefused(InputError):
    """ONNX Runtime cannot load a step model."""


def refused(src: str, err: BaseException) -> ModelRefused:
    reason = " ".join(str(err).split())[:400] or type(err).__name__
    return ModelRefused(f"model {src}: ONNX Runtime refuses it: {reason}")


def optimize(src: str, target: str, form: str, opts=None) -> None:
    """Write ONNX Runtime's ORT_ENABLE_ALL form of `src` to `target` (weights beside it in
    `<target stem>.bin`). `opts`: session options to start from (threads, allocators)."""
    import onnxruntime as ort
    if opts is None:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3    # the "hardware specific" warning is the point here
    opts.optimized_model_filepath = str(target)
    opts.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                  f"{Path(target).stem}.bin")
    opts.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes",
                                  "0")
    opts.add_session_config_entry("session.disable_prepacking", "1")
    disabled = ["NchwcTransformer"] if form == "nchw" else None
    half = fp16_weights(str(src))
    try:
        ort.InferenceSession(str(src), opts, providers=["CPUExecutionProvider"],
                             disabled_optimizers=disabled)
    except Exception as err:      # onnxruntime's Fail, InvalidGraph, ... : all one line
        raise refused(src, err) from None
    if half:
        stored_fp16(Path(target))


def fp16_weights(path: str) -> bool:
    """Whether the step model at `path` stores weights in fp16 behind a Cast."""
    model = onnx.load(path, load_external_data=False)
    half = {t.name for t in model.graph.initializer if t.data_type == TensorProto.FLOAT16}
    return any(n.op_type == "Cast" and n.input and n.input[0] in half for n in model.graph.node)


def stored_fp16(path: Path) -> None:
    """The optimised model at `path` with its fp16 weights stored in fp16 again: ONNX
    Runtime folded each Cast of an fp16 weight into an fp32 weight (and reordered it into
    NCHWc blocks where it blocks the conv), so every fp32 weight of two or more axes whose
    values are all fp16 numbers (the Cast's values, permuted and zero-padded) becomes an fp16
    initializer read through a Cast that the step runs at every call, just before the node
    that reads it, so ONNX Runtime can free each copy before the next (its workspace). The
    kernels stay ONNX Runtime's fastest, NCHWc ones included, and the weights held are the
    fp16 ones."""
    from deploy.ort.weights import shape_inputs
    model = onnx.load(str(path))            # its side file read whole: rewritten below
    inline = shape_inputs(model)
    casts = []
    for k, t in enumerate(model.graph.initializer):
        if t.data_type != TensorProto.FLOAT or len(t.dims) < 2 or t.name in inline:
            continue
        value = numpy_helper.to_array(t)
        low = value.astype(np.float16)
        if value.size <= 1 or not np.array_equal(low.astype(np.float32), value):
            continue
        stored = f"{t.name}:float16"
        casts.append(helper.make_node("Cast", [stored], [t.name], to=TensorProto.FLOAT))
        model.graph.initializer[k].CopyFrom(numpy_helper.from_array(low, stored))
    nodes = []
    for node in model.graph.node:      # each Cast just before its first reader
        nodes += [c for c in casts if c.output[0] in node.input and c not in nodes]
        nodes.append(node)
    nodes += [c for c in casts if c not in nodes]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    side = path.with_suffix(".bin")
    side.unlink(missing_ok=True)
    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
              location=side.name, size_threshold=0)


def in_child(jobs: list[tuple[str, str, str]]) -> int:
    """Run `optimize` for every (src, target, form) in one child process; its peak RSS."""
    if not jobs:
        return 0
    env = child_env()
    out = subprocess.run([sys.executable, "-m", "deploy.ort.optimize"], input=json.dumps(jobs),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    last = out.stdout.strip().splitlines()[-1:] or ["{}"]
    try:
        report = json.loads(last[0])
    except json.JSONDecodeError:
        report = {}
    if "refused" in report:
        raise ModelRefused(report["refused"])
    if out.returncode != 0 or "peak_rss_bytes" not in report:
        tail = " ".join(out.stderr.strip().splitlines()[-1:]) or f"exit status {out.returncode}"
        raise InputError(f"optimising the step models failed in the child process: {tail}")
    return int(report["peak_rss_bytes"])


def main() -> None:
    from deploy.runtime.footprint import peak_rss_bytes
    for src, target, form in json.loads(sys.stdin.read()):
        try:
            optimize(src, target, form)
        except ModelRefused as err:
            print(json.dumps({"refused": str(err)}))
            sys.exit(3)
    print(json.dumps({"peak_rss_bytes": peak_rss_bytes()}))


if __name__ == "__main__":
    main()

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
converts them, and ONNX Runtime 1.31's ConstantFolding computes any node whose inputs are
all constant initializers and stores the result (fp32) in their place.
- A Cast of an fp16 weight, or of an int8 weight applied in its integer form (a Conv or Gemm
  on the integer values, then a Mul by the scale per channel: builder.py `weighted`), is
  folded, and the NCHWc rewrite may reorder the fp32 result into blocks; `stored_low` then
  stores every such weight at its type again behind a Cast of its own (exact: the values are
  fp16 numbers or integers, permuted and zero-padded). The step session loads the result
  without further optimisation (deploy/ort/process.py form_options), so nothing folds the
  Cast again, and the conv keeps the NCHWc kernel: measured on the README's MobileNetV2
  plan (one thread), plain kernels cost a quarter of the fps. ConvMulFusion is off for
  int8 models: it would fold the scale into the weight.
- A DequantizeLinear (an int8 weight read otherwise: a 1x1 conv by rows, a constant
  operand, a QDQ model's asymmetric weight): ConstantFolding skips it while ONNX Runtime's
  QDQ optimisations are on (the default; constant_folding.cc), so the weight stays int8,
  and its reader runs ONNX Runtime's plain kernel (NCHWc needs a constant weight).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from deploy.ort.providers import CPU, NCHW_ONLY
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
    disabled = NCHW_ONLY if form == "nchw" else []
    low = cast_weights(str(src))
    if low == "int8":      # the scale after an integer-valued conv stays a Mul (builder.py)
        disabled.append("ConvMulFusion")
    try:
        ort.InferenceSession(str(src), opts, providers=CPU,
                             disabled_optimizers=disabled or None)
    except Exception as err:      # onnxruntime's Fail, InvalidGraph, ... : all one line
        raise refused(src, err) from None
    if low:
        stored_low(Path(target), low)


def cast_weights(path: str) -> str | None:
    """"float16" or "int8" when the step model at `path` stores weights of that type
    behind a Cast to fp32 (deploy/steps/builder.py), else None."""
    model = onnx.load(path, load_external_data=False)
    kinds = {t.name: t.data_type for t in model.graph.initializer
             if t.data_type in (TensorProto.FLOAT16, TensorProto.INT8)}
    found = {kinds[n.input[0]] for n in model.graph.node
             if n.op_type == "Cast" and n.input and n.input[0] in kinds}
    return ("float16" if TensorProto.FLOAT16 in found else "int8") if found else None


def stored_low(path: Path, kind: str) -> None:
    """The optimised model at `path` with its weights stored as `kind` ("float16", "int8")
    again: ONNX Runtime folded each Cast of a stored weight into an fp32 weight (and
    reordered it into NCHWc blocks where it blocks the conv), so every fp32 weight of two or
    more axes whose values are all `kind` numbers (the Cast's values, permuted and
    zero-padded) becomes a `kind` initializer read through a Cast that the step runs at
    every call, just before the node that reads it, so ONNX Runtime can free each copy
    before the next (its workspace). The kernels stay ONNX Runtime's fastest, NCHWc ones
    included, and the weights held are the stored ones."""
    from deploy.ort.weights import shape_inputs
    model = onnx.load(str(path))            # its side file read whole: rewritten below
    inline = shape_inputs(model)
    casts = []
    for k, t in enumerate(model.graph.initializer):
        if t.data_type != TensorProto.FLOAT or len(t.dims) < 2 or t.name in inline:
            continue
        value = numpy_helper.to_array(t)
        low = (value.astype(np.float16) if kind == "float16"
               else np.clip(value, -128, 127).astype(np.int8))
        if value.size <= 1 or not np.array_equal(low.astype(np.float32), value):
            continue
        stored = f"{t.name}:{kind}"
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
    from sdf3.parent_death import die_with_parent
    die_with_parent()          # ends with the explore that started it (child_env)
    main()

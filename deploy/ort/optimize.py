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
converts them, and the optimised model must keep that node: ONNX Runtime 1.31's
ConstantFolding computes any node whose inputs are all constant initializers and stores the
result (fp32) in their place. It skips DequantizeLinear while its QDQ optimisations are on
(the default; constant_folding.cc), so int8 weights stay int8 as they are. A Cast of an fp16
initializer it would fold: `kept_casts` lists those initializers as graph inputs while the
model is optimised (an initializer that is also a graph input can be overridden at run time,
so ONNX Runtime does not treat it as constant) and takes them out of the inputs again
afterwards; the step session loads the result without further optimisation
(deploy/ort/process.py form_options), so nothing folds them later. Either way the NCHWc
rewrite, which reorders constant weights, leaves such a Conv in ONNX Runtime's plain kernel.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
from onnx import TensorProto, helper

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
    model = onnx.load(str(src))
    held = kept_casts(model)
    path = str(src)
    if held:
        path = str(Path(target).with_suffix(".src.onnx"))
        onnx.save(model, path)
    del model
    try:
        ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"],
                             disabled_optimizers=disabled)
    except Exception as err:      # onnxruntime's Fail, InvalidGraph, ... : all one line
        raise refused(src, err) from None
    finally:
        if held:
            Path(path).unlink(missing_ok=True)
    if held:
        graph_inputs_dropped(Path(target), held)


def kept_casts(model: onnx.ModelProto) -> set[str]:
    """The fp16 initializers that a Cast reads, added to `model`'s graph inputs (in place)
    so that ONNX Runtime's optimiser keeps the Cast; their names."""
    inits = {t.name: t for t in model.graph.initializer if t.data_type == TensorProto.FLOAT16}
    declared = {v.name for v in model.graph.input}
    names = {n.input[0] for n in model.graph.node
             if n.op_type == "Cast" and n.input and n.input[0] in inits} - declared
    for name in sorted(names):
        t = inits[name]
        model.graph.input.append(helper.make_tensor_value_info(name, t.data_type, list(t.dims)))
    return names


def graph_inputs_dropped(path: Path, names: set[str]) -> None:
    """The optimised model at `path` (weights in its side file) without `names` among its
    graph inputs: the step's ports are its inputs, as in the model it was made from."""
    model = onnx.load(str(path), load_external_data=False)
    kept = [v for v in model.graph.input if v.name not in names]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    onnx.save(model, str(path))


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

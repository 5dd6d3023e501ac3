"""A source model stored in fp16 and deployed by an fp32 plan: the deployment
computes in fp32, the unmodified model in fp16, so the verdict's tolerance is the fp16 one
(the lower of the plan's precision and the model's own), and `explore run` says so. Models
built with onnx.helper: a Conv/Relu chain with fp16 weights and fp16 input and output (as
`model.half()` exports), and the same network behind fp32 input/output Casts (a converter's
keep_io_types). A real error (one filter's weights damaged in a step model) still fails."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from deploy.build.derive import derive
from deploy.checks.reference import stored_dtype
from deploy.run.verdict import RTOL
from explorer.cli.main import main
from deploy_fixtures import make_plan
from refusals import redigest

CHANNELS = [3, 16, 16, 16, 16, 8]


def fp16_chain(path: Path, fp16_io: bool = True) -> Path:
    """input [1, 3, 14, 12] -> 5 x (3x3 Conv with fp16 weights and bias, Relu but after the
    last) -> output, every tensor fp16; with `fp16_io` False the graph's input and output
    are fp32 with a Cast on either side."""
    rng = np.random.default_rng(29)
    elem_io = TensorProto.FLOAT16 if fp16_io else TensorProto.FLOAT
    nodes, inits = [], []
    x = "input"
    if not fp16_io:
        nodes.append(helper.make_node("Cast", [x], ["input_h"], to=TensorProto.FLOAT16, name="cast_in"))
        x = "input_h"
    for i, (cin, cout) in enumerate(zip(CHANNELS, CHANNELS[1:])):
        w = (rng.standard_normal((cout, cin, 3, 3)) * 1.4 / np.sqrt(cin * 9)).astype(np.float16)
        b = (rng.standard_normal(cout) * 0.1).astype(np.float16)
        inits += [numpy_helper.from_array(w, f"conv{i}.weight"), numpy_helper.from_array(b, f"conv{i}.bias")]
        nodes.append(helper.make_node("Conv", [x, f"conv{i}.weight", f"conv{i}.bias"], [f"c{i}"],
                                      name=f"conv{i}", kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        x = f"c{i}"
        if i < len(CHANNELS) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"], name=f"relu{i}"))
            x = f"r{i}"
    if fp16_io:
        nodes[-1].output[0] = "output"
    else:
        nodes.append(helper.make_node("Cast", [x], ["output"], to=TensorProto.FLOAT, name="cast_out"))
    graph = helper.make_graph(nodes, "half", [helper.make_tensor_value_info("input", elem_io, [1, 3, 14, 12])],
                              [helper.make_tensor_value_info("output", elem_io, [1, CHANNELS[-1], 14, 12])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def deployed(tmp_path: Path, fp16_io: bool, parts: bool) -> Path:
    """The chain deployed by an fp32 plan: every layer whole, or every layer by parts."""
    cnn = load_onnx(fp16_chain(tmp_path / f"half{int(fp16_io)}.onnx", fp16_io), "net")
    phases = all_parts(cnn) if parts else {k: 1 for k in cnn.order()}
    plan = make_plan([cnn], {"net": phases}, data_bytes=4)
    assert plan["precision"] == "fp32" and plan["data_bytes"] == 4
    out = tmp_path / f"dep{int(fp16_io)}{int(parts)}"
    shutil.rmtree(out, ignore_errors=True)
    derive(plan, {"net": cnn}, out)
    return out


def run(capsys, out: Path) -> tuple[int, dict, str]:
    """`explore run --json` and the plain `explore run` line of the CNN."""
    capsys.readouterr()
    code = main(["run", str(out), "--frames", "3", "--json", "--in-process", "--threads", "1"])
    result = json.loads(capsys.readouterr().out)
    assert main(["run", str(out), "--frames", "3", "--in-process", "--threads", "1"]) == code
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("  net: "))
    return code, result, line


@pytest.mark.parametrize("fp16_io", [True, False], ids=["fp16-io", "fp32-io"])
@pytest.mark.parametrize("parts", [False, True], ids=["whole", "parts"])
def test_an_fp16_stored_model_passes_at_its_own_precision(tmp_path, capsys, fp16_io, parts):
    out = deployed(tmp_path, fp16_io, parts)
    assert stored_dtype(out / "reference" / "net.onnx") == "float16"
    code, res, line = run(capsys, out)
    v = res["verdict"]["net"]
    assert code == 0 and v["verdict"] == "PASS", v
    assert v["reference_dtype"] == "float16" and v["stored_dtype"] == "float16"
    assert v["tolerance"] == RTOL["float16"] * v["max_abs_output"]
    # the deployment computes in fp32: against an fp32 yardstick it would be a false FAIL
    assert v["max_abs_diff"] > RTOL["float32"] * v["max_abs_output"], v
    assert 0.3 < v["max_abs_output"] < 30                # outputs of order 1
    assert line.endswith(f"(tolerance {v['tolerance']:.3g}, float16 reference, the model is "
                         f"stored in fp16): PASS"), line


def _damage_one_filter(out: Path, layer: str, scale: float) -> None:
    """Multiply output channel 0 of `layer`'s weights in its step model by `scale`."""
    manifest = json.loads((out / "manifest.json").read_text())
    rel = next(r for r, m in manifest["models"].items() if m["layer"] == layer)
    model = onnx.load(str(out / rel))
    for i, t in enumerate(model.graph.initializer):
        w = numpy_helper.to_array(t)
        if w.ndim == 4:
            w = w.copy()
            w[0] *= scale
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(w, t.name))
            break
    else:
        raise AssertionError(f"no 4-D weight in {rel}")
    onnx.save(model, str(out / rel))
    redigest(out)


@pytest.mark.parametrize("parts", [False, True], ids=["whole", "parts"])
def test_a_damaged_weight_still_fails(tmp_path, capsys, parts):
    """One filter of the last conv 25 % too large: beyond the fp16 tolerance too, exit 4."""
    out = deployed(tmp_path, True, parts)
    _damage_one_filter(out, "conv4", 1.25)
    code, res, line = run(capsys, out)
    v = res["verdict"]["net"]
    assert code == 4 and v["verdict"] == "FAIL", v
    assert v["reference_dtype"] == "float16" and v["max_abs_diff"] > v["tolerance"]
    assert line.endswith("float16 reference, the model is stored in fp16): FAIL"), line


def test_an_fp32_model_keeps_the_fp32_tolerance(tmp_path):
    """The same chain in fp32 (weights, input, output) is an fp32 yardstick."""
    path = fp16_chain(tmp_path / "h.onnx")
    model = onnx.load(str(path))
    for i, t in enumerate(model.graph.initializer):
        model.graph.initializer[i].CopyFrom(
            numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))
    for v in (*model.graph.input, *model.graph.output):
        v.type.tensor_type.elem_type = TensorProto.FLOAT
    onnx.save(model, str(tmp_path / "f.onnx"))
    assert stored_dtype(tmp_path / "f.onnx") == "float32"
    assert stored_dtype(path) == "float16"

"""fp16 and mixed plans hold the weights the plan counts: a small graph made with onnx.helper
(a 3x3 conv with BatchNorm folded into it, a stride-2 depthwise conv, a 1x1 conv with a
residual join, a Gemm classifier) deployed at fp16 and at mixed, whole and by parts. The
backend holds its weights as fp16 / int8 arrays whose bytes are the plan's parameter bytes
within 5 % (the count made here from the layers), the outputs PASS against the reference
computed with the same weights, and one output channel of a weight damaged in a step model
(the classifier's row of one class, negated) FAILs."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from deploy.build.derive import derive
from deploy.ort.backend import OrtBackend
from deploy.runtime import manifest as mf
from deploy.runtime.executor import Executor
from explorer.app.model import PRECISIONS
from explorer.cli.main import main
from deploy_fixtures import make_app, plan_of
from refusals import redigest

STORED = {"fp16": "float16", "mixed": "int8"}
C = 64


def net(path: Path) -> Path:
    """input [1, 64, 10, 8] -> Conv 3x3 + BN + Relu -> depthwise 3x3 stride 2 + Relu ->
    Conv 1x1 -> Add (the depthwise output) -> GAP -> Flatten -> Gemm 64x32 -> output."""
    rng = np.random.default_rng(5)
    inits = []

    def w(name, shape, fan_in):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * 1.4 / np.sqrt(fan_in)).astype(np.float32), name))
        return name

    def v(name, values):
        inits.append(numpy_helper.from_array(np.asarray(values, np.float32), name))
        return name

    n = helper.make_node
    nodes = [
        n("Conv", ["x", w("w1", [C, C, 3, 3], C * 9), w("b1", [C], 1)], ["c1"], name="conv1",
          kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", v("g", rng.uniform(0.5, 1.5, C)), v("be", rng.standard_normal(C) * 0.1),
                                 v("m", rng.standard_normal(C) * 0.1), v("var", rng.uniform(0.5, 2.0, C))],
          ["bn1"], name="bn1"),
        n("Relu", ["bn1"], ["r1"], name="relu1"),
        n("Conv", ["r1", w("w2", [C, 1, 3, 3], 9), w("b2", [C], 1)], ["c2"], name="dw2",
          kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2], group=C),
        n("Relu", ["c2"], ["r2"], name="relu2"),
        n("Conv", ["r2", w("w3", [C, C, 1, 1], C), w("b3", [C], 1)], ["c3"], name="pw3", kernel_shape=[1, 1]),
        n("Add", ["c3", "r2"], ["a3"], name="add3"),
        n("GlobalAveragePool", ["a3"], ["g4"], name="gap4"),
        n("Flatten", ["g4"], ["f4"], name="flat4"),
        n("Gemm", ["f4", w("w5", [32, C], C), w("b5", [32], 1)], ["y"], name="fc5", transB=1),
    ]
    graph = helper.make_graph(nodes, "stored", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, 10, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.save(model, str(path))
    return path


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return load_onnx(net(tmp_path_factory.mktemp("stored") / "net.onnx"), "net")


def deployed(cnn, folder: Path, precision: str, parts: bool) -> tuple[Path, dict]:
    """`cnn` deployed by a plan at `precision`: every layer whole, or every layer by parts."""
    app = replace(make_app([cnn], data_bytes=2), precision=PRECISIONS[precision])
    phases = all_parts(cnn) if parts else {k: 1 for k in cnn.order()}
    plan = plan_of(app, {cnn.name: phases})
    out = folder / f"{precision}{int(parts)}"
    shutil.rmtree(out, ignore_errors=True)
    derive(plan, {cnn.name: cnn}, out)
    return out, plan


def held_by_type(out: Path) -> dict[str, int]:
    """Bytes of the weights ONNX Runtime's sessions hold, by element type, once loaded."""
    manifest = mf.load(out)
    backend = OrtBackend(manifest.dtype, threads=1)
    Executor(manifest, out, backend)
    return backend.param_bytes_by_type()


def verdict(capsys, out: Path) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["run", str(out), "--frames", "3", "--json", "--in-process", "--threads", "1"])
    return code, json.loads(capsys.readouterr().out)["verdict"]["net"]


@pytest.mark.parametrize("parts", [False, True], ids=["whole", "parts"])
@pytest.mark.parametrize("precision", ["fp16", "mixed"])
def test_weights_held_at_the_plans_precision(cnn, tmp_path, precision, parts):
    out, plan = deployed(cnn, tmp_path, precision, parts)
    par_bytes = PRECISIONS[precision].par_bytes
    counted = sum(int(np.asarray(v).size) for layer in cnn.layers() for v in layer.params.values()) * par_bytes
    assert plan["param_bytes"] == counted
    held = held_by_type(out)
    weights = held[STORED[precision]]
    # the multi-dimensional weights at the stored type: every W of the four layers
    big = sum(layer.params["W"].size for layer in cnn.layers() if "W" in layer.params)
    assert weights == big * np.dtype(STORED[precision]).itemsize
    # fp32 beside them: biases (and the int8 scales, one per output channel)
    assert set(held) == {STORED[precision], "float32"}
    total = sum(held.values())
    assert abs(total - counted) <= 0.05 * counted, (held, counted)


@pytest.mark.parametrize("parts", [False, True], ids=["whole", "parts"])
@pytest.mark.parametrize("precision", ["fp16", "mixed"])
def test_outputs_pass_against_the_reference_with_the_same_weights(cnn, tmp_path, capsys, precision, parts):
    out, _ = deployed(cnn, tmp_path, precision, parts)
    code, v = verdict(capsys, out)
    assert code == 0 and v["verdict"] == "PASS", v
    assert v["max_abs_diff"] <= 0.5 * v["tolerance"], v
    assert 0.1 < v["max_abs_output"] < 30


def _damage(out: Path, layer: str) -> None:
    """Output channel 0 of `layer`'s stored weight (fp16 or int8) negated, in every step
    model of it."""
    manifest = json.loads((out / "manifest.json").read_text())
    rels = [r for r, m in manifest["models"].items() if layer in m.get("layers", [m["layer"]])]
    assert rels
    for rel in rels:
        model = onnx.load(str(out / rel))
        for k, t in enumerate(model.graph.initializer):
            w = numpy_helper.to_array(t)
            if t.name.startswith("param:") and w.ndim >= 2 and w.dtype in (np.float16, np.int8):
                w = w.copy()
                w[0] = -w[0]
                model.graph.initializer[k].CopyFrom(numpy_helper.from_array(w, t.name))
        onnx.save(model, str(out / rel))
    redigest(out)


@pytest.mark.parametrize("parts", [False, True], ids=["whole", "parts"])
@pytest.mark.parametrize("precision", ["fp16", "mixed"])
def test_a_damaged_stored_weight_fails(cnn, tmp_path, capsys, precision, parts):
    out, _ = deployed(cnn, tmp_path, precision, parts)
    _damage(out, "fc5")
    code, v = verdict(capsys, out)
    assert code == 4 and v["verdict"] == "FAIL", v

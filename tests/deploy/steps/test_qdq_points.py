"""A QDQ model with quantization points inside fused layers (SiLU, squeeze-excitation gates,
HardSwish as a node and by parts; tests/onnx_cases.py `qdq_blocks`, quantized by ONNX
Runtime's quantize_static) deploys at the least memory, by parts, as the network it
describes: every step rounds where the model rounds, so the deployment's outputs are the QDQ
model's own (plain ONNX Runtime), element by element. So do a point between two nodes of an
opaque layer (`qdq_opaque`) and a MatMul whose output is a point before its bias Add
(`qdq_matmul`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper as nh

import memtrade
from deploy.runtime import manifest as mf
from onnx_cases import qdq_blocks, qdq_export, qdq_matmul, qdq_opaque

pytest.importorskip("onnxruntime.quantization")


def _deployed(folder: Path, models: dict[str, Path], out: str):
    """An app of `models` (CNN name -> QDQ model) explored at the least memory, deployed."""
    app = memtrade.load_app({"name": "qdq", "cnns": [{"name": k, "model": v.name} for k, v in models.items()]},
                            base_dir=folder)
    found = memtrade.explore(app, mem=0, effort="full", population=6, generations=2,
                             relink_rounds=0, local_rounds=0, workers=1)
    return app, memtrade.deploy(found, folder / out)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qdq_points")
    model = qdq_export(qdq_blocks(folder / "net.onnx"), folder / "net.qdq.onnx")
    return (*_deployed(folder, {"net": model}, "dep"), model)


def _same_outputs(app, dep, models: dict[str, Path]):
    """The deployment's outputs equal each QDQ model's run by plain ONNX Runtime, element by
    element, on three frames; its run (returned) PASSes with max |diff| 0 and arena = plan."""
    plain = {k: ort.InferenceSession(str(v), providers=["CPUExecutionProvider"]) for k, v in models.items()}
    frames = np.random.default_rng(7).standard_normal((3, 1, 3, 8, 8), dtype=np.float32)
    with memtrade.Session(dep.path) as sess:
        for frame in frames:
            got = sess.run({k: frame for k in models})
            for name, session in plain.items():
                (want,) = session.run(None, {"input": frame})
                assert np.abs(want).max() > 0
                np.testing.assert_array_equal(got[name][0], want)
    result = memtrade.run(dep.path, frames=2, threads=1)
    assert all(v.verdict == "PASS" for v in result.verdicts.values())
    assert set(result.max_abs_diff.values()) == {0}
    assert result.arena_bytes == result.plan.buffer_bytes
    return result


def test_outputs_are_the_qdq_models_element_by_element(deployment):
    app, dep, model = deployment
    result = _same_outputs(app, dep, {"net": model})
    assert result.calls_per_frame["net"] > len(app.cnns["net"].graph)     # layers by parts


def test_points_between_opaque_nodes_and_before_a_bias_add_deploy_as_the_model(tmp_path):
    """`qdq_opaque`: a point between two nodes of an opaque layer; `qdq_matmul`: a MatMul
    whose weight is quantized per output on its axis 1 and whose output is a point before
    its bias Add (kept a layer of its own)."""
    models = {"erf": qdq_opaque(tmp_path), "mm": qdq_matmul(tmp_path)}
    app, dep = _deployed(tmp_path, models, "dep")
    assert list(app.cnns["erf"].quantized.inner) == ["Erf_3@/Erf_2/out"]
    assert app.cnns["mm"].quantized.apart == {"mm": "Add"}
    _same_outputs(app, dep, models)


def test_each_step_rounds_at_the_points_inside_its_layer(deployment):
    """The manifest holds each point's scale as the model's QuantizeLinear has it, and the
    models of one layer (whole, or its parts) quantize once per point inside it besides
    their store (the plan at the least memory runs most of these layers by parts)."""
    app, dep, model = deployment
    cnn = app.cnns["net"]
    manifest = mf.load(dep.path)
    qdq = onnx.load(str(model))
    consts = {t.name: nh.to_array(t) for t in qdq.graph.initializer}
    scales = {n.input[0]: float(consts[n.input[1]]) for n in qdq.graph.node if n.op_type == "QuantizeLinear"}
    inner = cnn.quantized.inner
    assert inner
    for name, s in inner.items():
        assert manifest.quantization.by_tensor[f"net/{name}"].scale == s.scale[0]
        assert s.scale[0] in scales.values()
    checked = 0
    for layer in cnn.order():
        points = cnn.quantized.points_of(layer)
        for form in ("whole", "part"):
            path = Path(dep.path) / "models" / "net" / f"{layer}.{form}.onnx"
            if path.is_file():
                ops = [n.op_type for n in onnx.load(str(path)).graph.node]
                assert ops.count("QuantizeLinear") == len(points) + 1, (path.name, ops)
                checked += bool(points)
    assert checked >= 3

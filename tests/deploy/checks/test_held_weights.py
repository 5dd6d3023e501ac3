"""The fp16/mixed reference's weights (deploy/checks/rounding.py `with_held_weights`): the
original model with each weight replaced so that csdf's import of it, which folds BatchNorm
into the Conv, transposes a Gemm's B (transB=0) and scales it by alpha, and transposes a
MatMul's B, gives back exactly the values the deployment computes with (`held`), layer by
layer; fp32 storage leaves the model as it is."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from csdf.onnx_import import load_onnx
from deploy.checks.rounding import with_held_weights
from deploy.quant.stored import held, weights_of


def _model(path) -> str:
    rng = np.random.default_rng(11)
    inits = []

    def t(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    n = helper.make_node
    nodes = [
        n("Conv", ["x", t("w1", rng.standard_normal((8, 4, 3, 3)) * 0.3), t("b1", rng.standard_normal(8))], ["c1"],
          name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", t("g", rng.uniform(0.2, 3.0, 8)), t("be", rng.standard_normal(8)),
                                 t("m", rng.standard_normal(8)), t("v", rng.uniform(0.5, 2.0, 8))], ["bn1"], name="bn1"),
        n("Relu", ["bn1"], ["r1"], name="relu1"),
        n("Conv", ["r1", t("w2", rng.standard_normal((8, 8, 1, 1)) * 0.3)], ["c2"], name="conv2", kernel_shape=[1, 1]),
        n("GlobalAveragePool", ["c2"], ["g2"], name="gap"),
        n("Flatten", ["g2"], ["f2"], name="flat"),
        n("Gemm", ["f2", t("w3", rng.standard_normal((8, 6))), t("b3", rng.standard_normal(6))], ["y3"],
          name="fc3", alpha=0.5),
        n("MatMul", ["y3", t("w4", rng.standard_normal((6, 5)))], ["y"], name="mm4"),
    ]
    graph = helper.make_graph(nodes, "held", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.save(model, str(path))
    return str(path)


@pytest.mark.parametrize("kind", ["float16", "int8"])
def test_the_import_of_the_held_model_gives_the_held_weights(tmp_path, kind):
    path = _model(tmp_path / "m.onnx")
    cnn = load_onnx(path, "m")
    assert "W" not in cnn.layer("conv1").param_sources          # BatchNorm folded into it
    out, missed = with_held_weights(onnx.load(path), cnn, kind)
    assert missed == []
    onnx.save(out, str(tmp_path / "held.onnx"))
    again = load_onnx(str(tmp_path / "held.onnx"), "m")
    storage = weights_of(kind, cnn)
    checked = 0
    for layer in cnn.layers():
        w = layer.params.get("W")
        if w is None:
            continue
        want = held(storage, layer, "W")
        assert not np.array_equal(want, w)           # the held values are not the fp32 ones
        np.testing.assert_allclose(again.layer(layer.name).params["W"], want, rtol=2e-6, atol=1e-7)
        checked += 1
    assert checked == 4
    # the biases (one axis) are the model's own
    np.testing.assert_allclose(again.layer("conv1").params["B"], cnn.layer("conv1").params["B"], rtol=1e-6)


def test_fp32_storage_changes_nothing(tmp_path):
    path = _model(tmp_path / "m.onnx")
    model = onnx.load(path)
    out, missed = with_held_weights(model, load_onnx(path, "m"), "float32")
    assert missed == [] and out.SerializeToString() == model.SerializeToString()

"""How deployments store layer parameters (deploy/quant/stored.py) and the step models that
convert them (deploy/steps/builder.py), checked against values computed here: the fp32 values
a step computes with equal ONNX Runtime's own Cast / DequantizeLinear of what it stores, a QDQ
model's integers come back from its own scales, and weights converted in blocks give the
whole layer's result."""
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

from csdf.model import Layer
from csdf.onnx_qdq import Scale
from deploy.quant.stored import WEIGHT_TYPES, Weights, held, quantized, stored_low, weights_for
from deploy.steps.builder import BLOCK_BYTES, CHANNEL_ALIGN, Builder


def _run(b: Builder, out: str, feeds: dict[str, np.ndarray]) -> np.ndarray:
    inputs = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in feeds.items()]
    graph = helper.make_graph(b.nodes, "t", inputs, [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                              b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def _conv(cout: int = 6, cin: int = 4, seed: int = 0) -> Layer:
    rng = np.random.default_rng(seed)
    return Layer("c", "Conv", {}, {"W": rng.standard_normal((cout, cin, 3, 3)).astype(np.float32),
                                   "B": rng.standard_normal(cout).astype(np.float32)})


def test_precisions_map_to_storage_types():
    assert WEIGHT_TYPES == {"fp32": "float32", "fp16": "float16", "mixed": "int8", "int8": "int8"}
    assert weights_for("mixed") == "int8" and weights_for("fp64") == "float32"
    assert stored_low(np.zeros((2, 2))) and not stored_low(np.zeros(5)) and not stored_low(np.zeros((1, 1)))


def test_param_is_what_onnx_runtime_computes_from_the_stored_form():
    layer = _conv()
    for kind, initializer_type in (("float16", TensorProto.FLOAT16), ("int8", TensorProto.INT8)):
        b = Builder("float32", Weights(kind))
        name = b.param(layer, "W")
        stored = {t.name: t for t in b.inits}
        assert stored["param:c:W"].data_type == initializer_type
        got = _run(b, name, {})
        np.testing.assert_array_equal(got, held(Weights(kind), layer, "W"))
    w = layer.params["W"]
    np.testing.assert_array_equal(held(Weights("float16"), layer, "W"), w.astype(np.float16).astype(np.float32))
    s = np.abs(w).reshape(6, -1).max(axis=1) / 127
    assert np.abs(held(Weights("int8"), layer, "W") - w).max() <= s.max() / 2 + 1e-6
    # biases stay fp32, and fp32 storage is the importer's values
    b = Builder("float32", Weights("int8"))
    assert b.param(layer, "B") == "param:c:B" and b.inits[0].data_type == TensorProto.FLOAT
    np.testing.assert_array_equal(held(Weights("float32"), layer, "W"), w)


def test_a_qdq_models_own_scales_give_back_its_integers():
    rng = np.random.default_rng(3)
    ints = rng.integers(-20, 30, size=(3, 2, 1, 1)).astype(np.int8)
    scale = np.array([0.5, 0.25, 0.125], np.float32)
    zero = np.array([2, -1, 0], np.int8)
    w = ((ints.astype(np.float32) - zero[:, None, None, None]) * scale[:, None, None, None])
    own = Scale(tuple(scale.tolist()), tuple(zero.tolist()), 0, "int8")
    q, s, zp, axis = quantized(w, own)
    np.testing.assert_array_equal(q, ints)
    assert axis == 0 and zp.tolist() == zero.tolist()
    layer = Layer("c", "Conv", {}, {"W": w}, param_sources={"W": "conv.weight"})
    b = Builder("float32", Weights("int8", {"c:W": own}))
    got = _run(b, b.param(layer, "W"), {})
    np.testing.assert_array_equal(got, w)
    # one scale for the whole tensor
    q, s, zp, _ = quantized(w[:1], Scale((0.5,), (2,), None, "int8"))
    assert s.ndim == 0 and zp.ndim == 0 and q.tolist() == ints[:1].tolist()


def test_blocks_compute_the_whole_layer():
    rows = BLOCK_BYTES // (4 * 64 * 9) + 3          # two blocks, the second short
    rng = np.random.default_rng(1)
    layer = Layer("c", "Conv", {}, {"W": rng.standard_normal((rows, 64, 3, 3)).astype(np.float32),
                                    "B": rng.standard_normal(rows).astype(np.float32)})
    x = rng.standard_normal((1, 64, 5, 5)).astype(np.float32)
    whole = Builder("float32", Weights("float16"))
    step = (rows - 3) // CHANNEL_ALIGN * CHANNEL_ALIGN      # whole NCHWc blocks of channels
    assert whole.blocks(layer, "W") == [(0, step), (step, rows)]
    assert step % 16 == 0 and 4 * step * 64 * 9 <= BLOCK_BYTES
    y = whole.weighted("Conv", layer, "x", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    assert [n.op_type for n in whole.nodes].count("Conv") == 2 and whole.nodes[-1].op_type == "Concat"
    ref = Builder("float32")
    layer16 = Layer("c", "Conv", {}, {"W": held(Weights("float16"), layer, "W"), "B": layer.params["B"]})
    r = ref.weighted("Conv", layer16, "x", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    assert [n.op_type for n in ref.nodes] == ["Conv"]      # fp32: one node, as before
    np.testing.assert_allclose(_run(whole, y, {"x": x}), _run(ref, r, {"x": x}), rtol=1e-5, atol=1e-5)


def test_int8_weights_scale_after_the_integer_conv():
    """op(x, Cast(q), B / s) * s: the same layer as op(x, q * s, B), with no DequantizeLinear."""
    layer = _conv(cout=8, cin=8, seed=4)
    x = np.random.default_rng(2).standard_normal((1, 8, 6, 6)).astype(np.float32)
    b = Builder("float32", Weights("int8"))
    y = b.weighted("Conv", layer, "x", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    assert [n.op_type for n in b.nodes] == ["Cast", "Conv", "Mul"]
    assert {t.name: t.data_type for t in b.inits}["param:c:W"] == TensorProto.INT8
    ref = Builder("float32")
    held_layer = Layer("c", "Conv", {}, {"W": held(Weights("int8"), layer, "W"), "B": layer.params["B"]})
    r = ref.weighted("Conv", held_layer, "x", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    np.testing.assert_allclose(_run(b, y, {"x": x}), _run(ref, r, {"x": x}), rtol=1e-5, atol=1e-5)

"""A model already quantized (QDQ, as ONNX Runtime's quantize_static writes it) imports as
its int8 network: the layers and edges of the fp32 model it was made from, the model's own
scales kept by layer, tensors between layers at one byte, and an app of it at int8."""
from __future__ import annotations

from math import prod
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from csdf.onnx_import import load_onnx
from sdf3.errors import InputError

quantization = pytest.importorskip("onnxruntime.quantization")

SHAPE = [1, 3, 16, 16]


def fp32_model(path: Path) -> Path:
    """input -> conv1 3x3 + Relu -> dw2 depthwise 3x3 stride 2 + Relu -> pw3 1x1 -> add3
    (pw3 + dw2: a residual) -> pw4 1x1 -> cat (add3, pw4) -> conv5 3x3 -> output."""
    rng = np.random.default_rng(0)
    inits = []

    def init(name, value):
        inits.append(nh.from_array(np.asarray(value, np.float32), name))
        return name

    def conv(name, x, cin, cout, k, out, group=1, **attrs):
        w = init(f"{name}.w", rng.standard_normal((cout, cin // group, k, k)) / np.sqrt(cin // group * k * k))
        b = init(f"{name}.b", rng.standard_normal(cout) * 0.1)
        return h.make_node("Conv", [x, w, b], [out], name=name, pads=[k // 2] * 4, group=group, **attrs)

    nodes = [conv("conv1", "input", 3, 8, 3, "c1"), h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             conv("dw2", "r1", 8, 8, 3, "c2", group=8, strides=[2, 2]),
             h.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             conv("pw3", "r2", 8, 8, 1, "c3"), h.make_node("Add", ["c3", "r2"], ["a3"], name="add3"),
             conv("pw4", "a3", 8, 4, 1, "c4"), h.make_node("Concat", ["a3", "c4"], ["cat"], name="cat", axis=1),
             conv("conv5", "cat", 12, 6, 3, "output")]
    graph = h.make_graph(nodes, "net", [h.make_tensor_value_info("input", T.FLOAT, SHAPE)],
                         [h.make_tensor_value_info("output", T.FLOAT, [1, 6, 8, 8])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


class Frames(quantization.CalibrationDataReader):
    def __init__(self):
        self.frames = iter([{"input": np.random.default_rng(i).standard_normal(SHAPE, dtype=np.float32)}
                            for i in range(4)])

    def get_next(self):
        return next(self.frames, None)


def qdq_models(folder: Path) -> tuple[Path, Path]:
    """fp32_model and its QDQ export by ONNX Runtime's quantize_static (per-channel int8
    weights, int8 activations, calibrated on 4 seeded frames), in `folder`."""
    fp32 = fp32_model(folder / "net.onnx")
    qdq = folder / "net.qdq.onnx"
    quantization.quantize_static(str(fp32), str(qdq), Frames(), quant_format=quantization.QuantFormat.QDQ,
                                 per_channel=True, activation_type=quantization.QuantType.QInt8,
                                 weight_type=quantization.QuantType.QInt8)
    ops = [n.op_type for n in onnx.load(str(qdq)).graph.node]
    assert ops.count("QuantizeLinear") == 8 and ops.count("DequantizeLinear") == 8 + 10, ops
    return fp32, qdq


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[Path, Path]:
    return qdq_models(tmp_path_factory.mktemp("qdq"))


def test_the_qdq_model_has_the_layers_and_edges_of_its_fp32_network(models):
    fp32, qdq = (load_onnx(p, "net") for p in models)
    assert fp32.quantized is None
    assert [(l.name, l.op, l.inputs, l.output_shape) for l in qdq.layers()] == \
        [(l.name, l.op, l.inputs, l.output_shape) for l in fp32.layers()]
    assert qdq.edges() == fp32.edges() and len(qdq.edges()) == 9
    assert [qdq.edge_shape(*e) for e in qdq.edges()] == [fp32.edge_shape(*e) for e in fp32.edges()]
    assert qdq.param_count == fp32.param_count == 8 * 27 + 8 * 9 + 64 + 32 + 6 * 108 + 8 + 8 + 8 + 4 + 6
    assert qdq.outputs == fp32.outputs == ["conv5"]


def test_weights_are_the_int8_values_at_the_models_own_scales(models):
    fp32, qdq = (load_onnx(p, "net") for p in models)
    stored = {t.name: nh.to_array(t) for t in onnx.load(str(models[1])).graph.initializer}
    for name in ("conv1", "dw2", "pw3", "pw4", "conv5"):
        scale = qdq.quantized.weights[f"{name}:W"]
        assert scale.dtype == "int8" and scale.axis == 0 and set(scale.zero_point) == {0}
        w = qdq.layer(name).params["W"]
        per_channel = np.asarray(scale.scale, np.float32).reshape(-1, 1, 1, 1)
        ints = stored[f"{name}.w_quantized"]
        assert ints.dtype == np.int8
        np.testing.assert_array_equal(w, ints.astype(np.float32) * per_channel)   # int8 x scale, exactly
        assert np.all(np.abs(w - fp32.layer(name).params["W"]) <= per_channel / 2 * (1 + 1e-5))
        assert qdq.quantized.weights[f"{name}:B"].dtype == "int32"


def test_every_tensor_between_layers_keeps_its_scale(models):
    qdq = load_onnx(models[1], "net")
    stored = {t.name: nh.to_array(t) for t in onnx.load(str(models[1])).graph.initializer}
    tensor = {"input": "input", "conv1": "r1", "dw2": "r2", "pw3": "c3", "add3": "a3", "pw4": "c4",
              "cat": "cat", "conv5": "output"}
    assert set(qdq.quantized.activations) == set(tensor)
    for layer, name in tensor.items():
        s = qdq.quantized.activations[layer]
        assert s.scale == (float(stored[f"{name}_scale"]),) and s.zero_point == (int(stored[f"{name}_zero_point"]),)
        assert s.axis is None and s.dtype == "int8"


def _app(folder: Path, model: Path, precision: str | None):
    from explorer.app.appfile import load_app
    path = folder / f"app_{model.stem}_{precision}.yaml"
    path.write_text("name: q\n" + (f"precision: {precision}\n" if precision else "")
                    + f"cnns:\n  - name: net\n    model: {model.name}\n")
    return load_app(path)


def test_an_app_of_a_qdq_model_is_int8_with_one_byte_tensors(models):
    from explorer.memory.buffers import memory_bytes, naive
    from explorer.memory.lifetimes import edge_uses
    fp32_app, qdq_app = _app(models[0].parent, models[0], None), _app(models[1].parent, models[1], None)
    assert fp32_app.precision.name == "fp32" and qdq_app.precision.name == "int8"
    cnn = qdq_app.cnns["net"]
    elements = sum(prod(cnn.edge_shape(*e)) for e in cnn.edges())
    params, buffers, _ = memory_bytes(qdq_app, naive(edge_uses(qdq_app)))
    assert buffers == elements == 16 * 16 * (3 + 8) + 8 * 8 * (8 + 8 + 8 + 8 + 8 + 4 + 12)
    assert params == cnn.param_count                       # one byte per weight and bias element
    assert memory_bytes(fp32_app, naive(edge_uses(fp32_app)))[1] == 4 * elements
    assert _app(models[1].parent, models[1], "int8").precision.name == "int8"


def test_a_qdq_model_at_another_precision_is_one_line(models):
    with pytest.raises(InputError) as err:
        _app(models[1].parent, models[1], "fp16")
    text = str(err.value)
    assert "\n" not in text and "precision" in text and "QDQ" in text and "'fp16'" in text


@pytest.mark.parametrize("mem", ["1GB", "0"])
def test_a_qdq_model_deploys_with_its_own_scales_and_passes(models, tmp_path, capsys, mem):
    """Reuse only and the least memory: no calibration (no warning), the arena at one byte
    with the plan's bytes, the model's QuantizeLinear scales in the manifest (its int8 held
    as uint8, zero point + 128: the same values), the weights held at one byte, the outputs
    those of the QDQ model itself within one step of its scale."""
    import json
    from deploy.runtime import manifest as mf
    from explorer.cli.main import main
    app = _app(models[1].parent, models[1], None)
    assert main([str(app.path), "--quiet", "--mem", mem, "--out", str(tmp_path / "o")]) == 0
    capsys.readouterr()
    assert main(["deploy", str(tmp_path / "o" / "plan.json"), "--out", str(tmp_path / "dep")]) == 0
    assert "calibration" not in capsys.readouterr().err
    manifest = mf.load(tmp_path / "dep")
    own = app.cnns["net"].quantized.activations
    assert {s.dtype for s in own.values()} == {"int8"}
    assert manifest.dtype == "uint8" and {k.split("/", 1)[1]: (v.scale, v.zero_point)
                                          for k, v in manifest.quantization.by_tensor.items()} \
        == {layer: (s.scale[0], s.zero_point[0] + 128) for layer, s in own.items()}
    assert main(["run", str(tmp_path / "dep"), "--frames", "2", "--json", "--in-process", "--threads", "1"]) == 0
    res = json.loads(capsys.readouterr().out)
    v = res["verdict"]["net"]
    assert v["verdict"] == "PASS" and v["reference_dtype"] == "int8"
    last = app.cnns["net"].order()[-1]
    assert v["max_abs_diff"] <= own[last].scale[0] * 1.001
    assert res["arena_bytes"] == res["plan_buffer_bytes"]
    weights = sum(int(np.prod(w.shape)) for layer in app.cnns["net"].layers()
                  for w in layer.params.values() if w.ndim >= 2)
    assert res["breakdown"]["weights_bytes"] >= weights     # int8 W + fp32 biases, not fp32 W
    assert res["param_bytes"] < 2 * res["plan_param_bytes"]


def _conv_bn_qdq(tmp_path: Path) -> tuple[Path, Path]:
    """Conv + BatchNorm, and its QDQ export by quantize_static with the BatchNorm left in
    place: a quantization point between them (the Conv's output) and after the BatchNorm."""
    rng = np.random.default_rng(1)
    inits = [nh.from_array(a.astype(np.float32), n) for n, a in (
        ("w", rng.standard_normal((4, 3, 3, 3)) / 5), ("g", rng.uniform(0.8, 1.2, 4)),
        ("b", rng.standard_normal(4) * 0.1), ("m", rng.standard_normal(4) * 0.1), ("v", rng.uniform(0.8, 1.2, 4)))]
    nodes = [h.make_node("Conv", ["input", "w"], ["c"], name="conv", pads=[1] * 4),
             h.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["output"], name="bn")]
    graph = h.make_graph(nodes, "net", [h.make_tensor_value_info("input", T.FLOAT, SHAPE)],
                         [h.make_tensor_value_info("output", T.FLOAT, [1, 4, 16, 16])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "bn.onnx"))
    quantization.quantize_static(str(tmp_path / "bn.onnx"), str(tmp_path / "bn.qdq.onnx"), Frames(),
                                 quant_format=quantization.QuantFormat.QDQ, per_channel=True)
    return tmp_path / "bn.onnx", tmp_path / "bn.qdq.onnx"


def test_a_batchnorm_after_a_quantization_point_stays_a_layer(tmp_path):
    """The Conv's output is rounded before the BatchNorm reads it: folding the BatchNorm into
    the Conv would skip that rounding, so the import keeps it a layer, with both scales."""
    fp32_path, qdq_path = _conv_bn_qdq(tmp_path)
    qdq, fp32 = load_onnx(qdq_path, "net"), load_onnx(fp32_path, "net")
    assert [(l.name, l.op) for l in fp32.layers()] == [("input", "Input"), ("conv", "Conv")]
    assert [(l.name, l.op, l.inputs) for l in qdq.layers()] == \
        [("input", "Input", []), ("conv", "Conv", ["input"]), ("bn", "BatchNormalization", ["conv"])]
    assert qdq.quantized.apart == {"conv": "BatchNormalization"} and not qdq.quantized.inner
    stored = {t.name: nh.to_array(t) for t in onnx.load(str(qdq_path)).graph.initializer}
    assert qdq.quantized.activations["conv"].scale == (float(stored["c_scale"]),)
    assert qdq.quantized.weights["conv:W"].axis == 0 and len(qdq.quantized.weights["conv:W"].scale) == 4


def test_a_weight_folded_with_batchnorm_keeps_its_scales_by_tensor(tmp_path):
    """The same model with no quantization point between Conv and BatchNorm (its Conv
    output's QuantizeLinear -> DequantizeLinear taken out): the import folds the BatchNorm
    into the Conv's W, so W's int8 scales are kept under the ONNX tensor they belong to."""
    fp32_path, qdq_path = _conv_bn_qdq(tmp_path)
    model = onnx.load(str(qdq_path))
    pair = [n for n in model.graph.node if "c" in n.input or any(i.startswith("c_QuantizeLinear") for i in n.input)]
    assert [n.op_type for n in pair] == ["QuantizeLinear", "DequantizeLinear"]
    bn = next(n for n in model.graph.node if n.op_type == "BatchNormalization")
    bn.input[0] = "c"
    for n in pair:
        model.graph.node.remove(n)
    onnx.save(model, str(tmp_path / "bn.folded.onnx"))
    qdq, fp32 = load_onnx(tmp_path / "bn.folded.onnx", "net"), load_onnx(fp32_path, "net")
    assert [(l.name, l.op) for l in qdq.layers()] == [(l.name, l.op) for l in fp32.layers()] \
        == [("input", "Input"), ("conv", "Conv")]
    assert not qdq.quantized.apart
    weight = next(n for n in model.graph.node if n.op_type == "Conv").input[1]
    assert qdq.quantized.weights[f"conv:{weight}"].axis == 0
    assert len(qdq.quantized.weights[f"conv:{weight}"].scale) == 4


def test_a_matmul_weight_keeps_its_scales_on_the_layers_output_axis(tmp_path):
    """A MatMul's [in, out] tensor quantized per output (axis 1) is the Gemm layer's W
    transposed: its scales are kept on W's axis 0, one per output, and give back the model's
    integers; the MatMul's output is a quantization point, so its bias Add stays a layer."""
    from onnx_cases import qdq_matmul
    path = qdq_matmul(tmp_path)
    qdq = load_onnx(path, "net")
    assert [(l.name, l.op) for l in qdq.layers()][-2:] == [("mm", "Gemm"), ("Add_6", "Add")]
    assert qdq.quantized.apart == {"mm": "Add"}
    model = onnx.load(str(path))
    stored = {t.name: nh.to_array(t) for t in model.graph.initializer}
    dq = next(n for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] == "fc.w_quantized")
    assert next(a.i for a in dq.attribute if a.name == "axis") == 1
    scale = qdq.quantized.weights["mm:W"]
    assert scale.axis == 0 and len(scale.scale) == 10
    w = qdq.layer("mm").params["W"]
    assert w.shape == (10, 16)
    per_out = np.asarray(scale.scale, np.float32).reshape(-1, 1)
    np.testing.assert_array_equal(np.rint(w / per_out).astype(np.int8), stored["fc.w_quantized"].T)

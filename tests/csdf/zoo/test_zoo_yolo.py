"""zoo:yolov2_16, MAFAT's network: Darknet's layer table for yolov2.cfg at 608, LeakyRelu fused."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import csdf.zoo as zoo
from csdf.onnx_import import load_onnx
from sdf3.errors import InputError

# Darknet's summary of yolov2.cfg at 608 x 608, layers 0-15 (layer, type, filters, size/stride,
# input w x h x c -> output w x h x c, BFLOPs), as `./darknet detector test` prints it.
DARKNET = """
0 conv 32 3 1 608 608 3 608 608 32 0.639
1 max 0 2 2 608 608 32 304 304 32 0
2 conv 64 3 1 304 304 32 304 304 64 3.407
3 max 0 2 2 304 304 64 152 152 64 0
4 conv 128 3 1 152 152 64 152 152 128 3.407
5 conv 64 1 1 152 152 128 152 152 64 0.379
6 conv 128 3 1 152 152 64 152 152 128 3.407
7 max 0 2 2 152 152 128 76 76 128 0
8 conv 256 3 1 76 76 128 76 76 256 3.407
9 conv 128 1 1 76 76 256 76 76 128 0.379
10 conv 256 3 1 76 76 128 76 76 256 3.407
11 max 0 2 2 76 76 256 38 38 256 0
12 conv 512 3 1 38 38 256 38 38 512 3.407
13 conv 256 1 1 38 38 512 38 38 256 0.379
14 conv 512 3 1 38 38 256 38 38 512 3.407
15 conv 256 1 1 38 38 512 38 38 256 0.379
"""
ROWS = [line.split() for line in DARKNET.strip().splitlines()]


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return zoo.model_path("yolov2_16", tmp_path_factory.mktemp("zoo"))


def test_known_name_and_unknown_listed():
    assert "yolov2_16" in zoo.ALL_NAMES and "yolov2_16" not in zoo.NAMES
    with pytest.raises(InputError, match="yolov2_16"):
        zoo.build("yolov3")


def test_layers_match_darknet_table(path):
    cnn = load_onnx(path, "y")
    layers = [cnn.graph.nodes[n]["layer"] for n in cnn.order() if n != "input"]
    assert [l.name for l in layers] == [("conv" if r[1] == "conv" else "pool") + r[0] for r in ROWS]
    for layer, (i, kind, filters, size, stride, wi, hi, ci, wo, ho, co, bflops) in zip(layers, ROWS):
        assert layer.op == ("Conv" if kind == "conv" else "MaxPool"), i
        assert list(layer.output_shape) == [1, int(co), int(ho), int(wo)], i
        assert layer.hyper["kernel_shape"] == [int(size)] * 2 and layer.hyper["strides"] == [int(stride)] * 2
        if kind == "conv":
            # BN folded, leaky ReLU (slope 0.1) fused: the layers Darknet runs
            assert layer.hyper["activation"] == ["LeakyRelu"]
            assert layer.hyper["leaky_alpha"] == pytest.approx(0.1)
            assert layer.params["W"].shape == (int(filters), int(ci), int(size), int(size))
            flops = 2 * int(wo) * int(ho) * int(co) * int(ci) * int(size) ** 2 / 1e9
            assert round(flops, 3) == float(bflops), i


def test_valid_onnx_and_o1_activations(path):
    model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    assert {n.op_type for n in model.graph.node} == {"Conv", "BatchNormalization", "LeakyRelu", "MaxPool"}
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(5).standard_normal((1, 3, 608, 608)).astype(np.float32)
    (out,) = session.run(None, {"input": x})
    assert out.shape == (1, 256, 38, 38)
    rms = float(np.sqrt(np.mean(np.square(out, dtype=np.float64))))
    assert 0.05 < rms < 20 and (out < 0).any()  # leaky: negative values survive, scaled by 0.1


def test_app_file_names_the_trunk(tmp_path):
    from explorer.app.appfile import load_app
    (tmp_path / "app.yaml").write_text("name: y\nplatform: jetson-tx2\nprecision: fp32\n"
                                       "cnns:\n  - name: y\n    fps: 0\n    model: zoo:yolov2_16\n")
    app = load_app(str(tmp_path / "app.yaml"), mem="0")
    assert app.cnns["y"].layer("conv15").output_shape == (1, 256, 38, 38)

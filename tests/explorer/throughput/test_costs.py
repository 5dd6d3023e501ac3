"""Per-layer cost counts on hand-built CNNs, checked against hand arithmetic and against the
published MobileNetV2 figure (Sandler et al. 2018: 300M multiply-adds, 3.4M parameters)."""
from __future__ import annotations

import numpy as np
import pytest

from csdf.model import CNN, Layer
from explorer.throughput.costs import cnn_costs, layer_cost, total_macs
from sdf3.errors import InputError


def _conv(name, src, cin, cout, k, s, h_out, group=1, bias=True, act=("Relu",)):
    params = {"W": np.zeros((cout, cin // group, k, k), np.float32)}
    if bias:
        params["B"] = np.zeros(cout, np.float32)
    return Layer(name, "Conv", {"kernel_shape": [k, k], "strides": [s, s],
                                "pads": [k // 2] * 4, "group": group,
                                "activation": list(act)},
                 params, [src], (1, cout, h_out, h_out))


def _small() -> CNN:
    cnn = CNN("small")
    cnn.add_layer(Layer("in", "Input", output_shape=(1, 8, 16, 16)))
    cnn.add_layer(_conv("dw", "in", 8, 8, 3, 1, 16, group=8))          # depthwise
    cnn.add_layer(_conv("gc", "dw", 8, 16, 3, 2, 8, group=2, act=()))  # grouped, stride 2
    cnn.add_layer(Layer("mp", "MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]},
                        inputs=["gc"], output_shape=(1, 16, 4, 4)))
    cnn.add_layer(Layer("ap", "AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]},
                        inputs=["gc"], output_shape=(1, 16, 4, 4)))
    cnn.add_layer(Layer("add", "Add", inputs=["mp", "ap"], output_shape=(1, 16, 4, 4)))
    cnn.add_layer(Layer("cat", "Concat", {"axis": 1}, inputs=["mp", "add"],
                        output_shape=(1, 32, 4, 4)))
    cnn.add_layer(Layer("gap", "GlobalAveragePool", inputs=["cat"],
                        output_shape=(1, 32, 1, 1)))
    cnn.add_layer(Layer("fl", "Flatten", inputs=["gap"], output_shape=(1, 32, 1, 1)))
    cnn.add_layer(Layer("fc", "Gemm", {}, {"W": np.zeros((10, 32), np.float32),
                                            "B": np.zeros(10, np.float32)},
                        ["fl"], (1, 10, 1, 1)))
    cnn.outputs = ["fc"]
    return cnn


def test_small_layers_exact():
    c = cnn_costs(_small())
    # depthwise 3x3 on 8x16x16, stride 1: each output element uses 1 channel x 9 taps
    assert c["dw"].macs == 8 * 16 * 16 * 9
    assert c["dw"].flops == 2 * 8 * 16 * 16 * 9 + 8 * 16 * 16 + 8 * 16 * 16  # + bias + relu
    assert c["dw"].param_elems == 8 * 9 + 8
    assert c["dw"].in_elems == 8 * 16 * 16 and c["dw"].out_elems == 8 * 16 * 16
    # grouped conv, 2 groups: each output sees 4 input channels x 9 taps, 16x8x8 outputs
    assert c["gc"].macs == 16 * 8 * 8 * 4 * 9
    assert c["gc"].flops == 2 * 16 * 8 * 8 * 36 + 16 * 8 * 8
    assert c["mp"].flops == 16 * 4 * 4 * 4 and c["mp"].macs == 0
    assert c["add"].flops == 16 * 4 * 4 and c["add"].in_elems == 2 * 256
    assert c["cat"].flops == 0 and c["cat"].in_elems == 256 + 256
    assert c["cat"].out_elems == 512
    assert c["gap"].flops == 512
    assert c["fl"].in_elems == 0 and c["fl"].out_elems == 0   # a view
    assert c["fc"].macs == 320 and c["fc"].flops == 640 + 10
    assert c["in"].flops == 0 and c["in"].out_elems == 0


def test_bytes_and_halo():
    c = cnn_costs(_small())
    dw = c["dw"]
    # whole: read 2048, write 2048 fp16 elements; params 80 at 1 byte
    assert dw.bytes(2, 1) == (2048 + 2048) * 2 + 80
    # by parts in 16 phases: a 3x3 stride-1 window re-reads 2 rows of 8 x 16 per extra phase
    assert dw.halo_elems(16) == 15 * 2 * 8 * 16
    assert dw.bytes(4, 4, 16) == (2048 + 2048 + 15 * 2 * 128) * 4 + 80 * 4
    # stride 2 with a 3x3 window: 1 row overlap, rows of 8 channels x 16 wide
    assert c["gc"].halo_elems(8) == 7 * 1 * 8 * 16
    # 2x2 stride-2 pooling windows do not overlap
    assert c["mp"].halo_elems(4) == 0
    assert dw.halo_elems(1) == 0


def _mobilenet_v2() -> CNN:
    """MobileNetV2 1.0 at 224x224 built from the paper's table (t, c, n, s)."""
    cnn = CNN("mobilenet_v2_hand")
    cnn.add_layer(Layer("input", "Input", output_shape=(1, 3, 224, 224)))
    h, c, prev = 112, 32, "conv0"
    cnn.add_layer(_conv(prev, "input", 3, 32, 3, 2, h, act=("Clip",)))
    i = 0
    for t, cout, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                          (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for rep in range(n):
            stride = s if rep == 0 else 1
            block_in, hid = prev, c * t
            x = prev
            if t != 1:
                cnn.add_layer(_conv(f"b{i}_exp", x, c, hid, 1, 1, h, act=("Clip",)))
                x = f"b{i}_exp"
            h = h // stride
            cnn.add_layer(_conv(f"b{i}_dw", x, hid, hid, 3, stride, h, group=hid,
                                act=("Clip",)))
            cnn.add_layer(_conv(f"b{i}_proj", f"b{i}_dw", hid, cout, 1, 1, h, act=()))
            prev = f"b{i}_proj"
            if stride == 1 and c == cout:
                cnn.add_layer(Layer(f"b{i}_add", "Add", inputs=[block_in, prev],
                                    output_shape=(1, cout, h, h)))
                prev = f"b{i}_add"
            c, i = cout, i + 1
    cnn.add_layer(_conv("conv_last", prev, 320, 1280, 1, 1, 7, act=("Clip",)))
    cnn.add_layer(Layer("gap", "GlobalAveragePool", inputs=["conv_last"],
                        output_shape=(1, 1280, 1, 1)))
    cnn.add_layer(Layer("fc", "Gemm", {}, {"W": np.zeros((1000, 1280), np.float32),
                                            "B": np.zeros(1000, np.float32)},
                        ["gap"], (1, 1000, 1, 1)))
    return cnn


def test_mobilenet_v2_published_macs():
    cnn = _mobilenet_v2()
    macs = total_macs(cnn)
    assert macs == pytest.approx(300e6, rel=0.03)          # published: 300M multiply-adds
    assert cnn.param_count == pytest.approx(3.4e6, rel=0.05)  # published: 3.4M parameters


def test_unknown_operator_is_input_error():
    cnn = CNN("odd")
    cnn.add_layer(Layer("in", "Input", output_shape=(1, 1, 4, 4)))
    cnn.add_layer(Layer("x", "NonMaxSuppression", inputs=["in"], output_shape=(1, 1, 4, 4)))
    with pytest.raises(InputError, match="NonMaxSuppression"):
        layer_cost(cnn, "x")

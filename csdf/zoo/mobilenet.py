"""MobileNetV1 (Howard et al. 2017) and MobileNetV2 (Sandler et al. 2018) at 224x224, 1000 classes.

Layer structure and names follow the Keras applications / torchvision definitions, whose
parameter counts (conv weights + BN gamma/beta + classifier) are the published 4.23M / 0.47M
and 3.50M.
"""
from __future__ import annotations

import onnx

from csdf.zoo import builder as b

# MobileNetV1: (pointwise output channels, depthwise stride) of the 13 separable blocks
_V1_BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]

# MobileNetV2: expansion t, output channels c, repeats n, first stride s (paper Table 2)
_V2_BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def _divisible(v: float, divisor: int = 8) -> int:
    """Round channels to a multiple of 8, never below 90% of v (the reference _make_divisible)."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def mobilenet_v1(seed: int, alpha: float = 1.0) -> onnx.ModelProto:
    """MobileNetV1 with width multiplier alpha: conv 3x3/2, 13 x (depthwise 3x3 + pointwise 1x1), FC.

    Every conv (depthwise included) is followed by BN and ReLU6, as in the Keras model.
    """
    tag = "" if alpha == 1.0 else f"_{int(round(alpha * 100)):03d}"
    net, x = b.new_net(f"mobilenet_v1{tag}", seed)
    x = b.conv_bn(net, x, int(32 * alpha), 3, "conv1", act="relu6", stride=2)
    for i, (cout, stride) in enumerate(_V1_BLOCKS, start=1):
        cin = net.shapes[x][1]
        x = b.conv_bn(net, x, cin, 3, f"conv_dw_{i}", act="relu6", stride=stride, group=cin)
        x = b.conv_bn(net, x, int(cout * alpha), 1, f"conv_pw_{i}", act="relu6")
    b.classifier(net, x, 1000)
    return b.to_model(net)


def mobilenet_v2(seed: int) -> onnx.ModelProto:
    """MobileNetV2 1.0: conv 3x3/2, 17 inverted residual blocks, conv 1x1 to 1280, FC."""
    net, x = b.new_net("mobilenet_v2", seed)
    x = b.conv_bn(net, x, 32, 3, "features.0", act="relu6", stride=2)
    index = 1
    for t, c, n, s in _V2_BLOCKS:
        for i in range(n):
            x = _inverted_residual(net, x, _divisible(c), s if i == 0 else 1, t, f"features.{index}")
            index += 1
    x = b.conv_bn(net, x, 1280, 1, f"features.{index}", act="relu6")
    b.classifier(net, x, 1000, name="classifier")
    return b.to_model(net)


def _inverted_residual(net: b.Net, x: str, cout: int, stride: int, t: int, name: str) -> str:
    """Expand 1x1 (if t > 1) -> depthwise 3x3 -> linear project 1x1; residual add when shapes match."""
    cin = net.shapes[x][1]
    hidden = cin * t
    y = x
    if t != 1:
        y = b.conv_bn(net, y, hidden, 1, f"{name}.expand", act="relu6")
    y = b.conv_bn(net, y, hidden, 3, f"{name}.dw", act="relu6", stride=stride, group=hidden)
    y = b.conv_bn(net, y, cout, 1, f"{name}.project", act=None)
    if stride == 1 and cin == cout:
        y = b.add(net, x, y, f"{name}.add")
    return y

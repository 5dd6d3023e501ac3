"""EfficientNet-B0 (Tan & Le 2019) at 224x224, 1000 classes.

MBConv blocks with swish (Sigmoid + Mul) and squeeze-and-excitation (GlobalAveragePool, 1x1
convs with bias, Sigmoid, Mul), as in the reference and torchvision models, whose count
(conv weights + SE biases + BN gamma/beta + FC) is the published 5.29M. Stochastic depth and
dropout are training-only and absent at inference.
"""
from __future__ import annotations

import onnx

from csdf.zoo import builder as b

# expansion, kernel, first stride, output channels, repeats (paper Table 1, stages 2-8)
_STAGES = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
           (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]


def efficientnet_b0(seed: int) -> onnx.ModelProto:
    """Stem conv 3x3/2 to 32, 16 MBConv blocks, conv 1x1 to 1280, FC."""
    net, x = b.new_net("efficientnet_b0", seed)
    x = b.conv_bn(net, x, 32, 3, "stem", act="swish", stride=2)
    for stage, (t, k, stride, cout, repeats) in enumerate(_STAGES, start=1):
        for i in range(repeats):
            x = _mbconv(net, x, cout, k, stride if i == 0 else 1, t, f"blocks.{stage}.{i}")
    x = b.conv_bn(net, x, 1280, 1, "head", act="swish")
    b.classifier(net, x, 1000, name="classifier")
    return b.to_model(net)


def _mbconv(net: b.Net, x: str, cout: int, k: int, stride: int, t: int, name: str) -> str:
    """Expand 1x1 (t > 1) -> depthwise kxk -> squeeze-excite (ratio 0.25 of block input) -> project."""
    cin = net.shapes[x][1]
    hidden = cin * t
    y = x
    if t != 1:
        y = b.conv_bn(net, y, hidden, 1, f"{name}.expand", act="swish")
    y = b.conv_bn(net, y, hidden, k, f"{name}.dw", act="swish", stride=stride, group=hidden)
    y = _squeeze_excite(net, y, max(1, cin // 4), f"{name}.se")
    y = b.conv_bn(net, y, cout, 1, f"{name}.project", act=None)
    if stride == 1 and cin == cout:
        y = b.add(net, x, y, f"{name}.add")
    return y


def _squeeze_excite(net: b.Net, x: str, squeeze: int, name: str) -> str:
    channels = net.shapes[x][1]
    s = b.global_avgpool(net, x, f"{name}.pool")
    s = b.swish(net, b.conv(net, s, squeeze, 1, f"{name}.reduce", bias=True), f"{name}.reduce.swish")
    s = b.sigmoid(net, b.conv(net, s, channels, 1, f"{name}.expand", bias=True), f"{name}.gate")
    return b.mul(net, x, s, f"{name}.scale")

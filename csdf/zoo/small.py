"""Small networks in the styles TASO evaluates (Wen et al. 2020: GoogLeNet, ResNet, VGG,
SqueezeNet), at 112x112 and with fewer channels where the original is large, so that every
layer can be profiled with every primitive in seconds on a small CPU (benchmarks/
primitives.py). They keep each family's layer kinds: VGG's 3x3 stride-1 stacks (Winograd's
case), ResNet's basic blocks with strided 3x3 and 1x1 projection shortcuts, GoogLeNet's
Inception modules (1x1 | 3x3 | 5x5 | pool branches), SqueezeNet 1.1's Fire modules
(squeeze 1x1, expand 1x1 and 3x3 concatenated) with its 1x1 conv classifier.
"""
from __future__ import annotations

import onnx

from csdf.zoo import builder as b

SHAPE = (1, 3, 112, 112)
CLASSES = 100


def vgg_small(seed: int) -> onnx.ModelProto:
    """VGG-11 layout (conv 3x3 stacks, 2x2 max pools) at half width."""
    net, x = b.new_net("vgg_small", seed, SHAPE)
    for stage, (c, n) in enumerate([(32, 1), (64, 1), (128, 2), (256, 2), (256, 2)]):
        for i in range(n):
            x = b.conv_bn(net, x, c, 3, f"conv{stage + 1}_{i + 1}")
        x = b.maxpool(net, x, 2, 2, 0, f"pool{stage + 1}")
    b.classifier(net, x, CLASSES)
    return b.to_model(net)


def resnet_small(seed: int) -> onnx.ModelProto:
    """ResNet-18 layout (7x7/2 stem, max pool, 4 stages of 2 basic blocks) at half width."""
    net, x = b.new_net("resnet_small", seed, SHAPE)
    x = b.conv_bn(net, x, 32, 7, "conv1", stride=2)
    x = b.maxpool(net, x, 3, 2, 1, "pool1")
    for stage, c in enumerate([32, 64, 128, 256]):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            name = f"layer{stage + 1}.{block}"
            y = b.conv_bn(net, x, c, 3, f"{name}.conv1", stride=stride)
            y = b.conv_bn(net, y, c, 3, f"{name}.conv2", act=None)
            if stride != 1 or net.shapes[x][1] != c:
                x = b.conv_bn(net, x, c, 1, f"{name}.downsample", act=None, stride=stride)
            x = b.relu(net, b.add(net, y, x, f"{name}.add"), f"{name}.relu")
    b.classifier(net, x, CLASSES)
    return b.to_model(net)


def _inception(net: b.Net, x: str, name: str, c1: int, c3: tuple[int, int],
               c5: tuple[int, int], cp: int) -> str:
    b1 = b.conv_bn(net, x, c1, 1, f"{name}.1x1")
    b3 = b.conv_bn(net, b.conv_bn(net, x, c3[0], 1, f"{name}.3x3_reduce"), c3[1], 3, f"{name}.3x3")
    b5 = b.conv_bn(net, b.conv_bn(net, x, c5[0], 1, f"{name}.5x5_reduce"), c5[1], 5, f"{name}.5x5")
    bp = b.conv_bn(net, b.maxpool(net, x, 3, 1, 1, f"{name}.pool"), cp, 1, f"{name}.pool_proj")
    return b.concat(net, [b1, b3, b5, bp], f"{name}.concat")


def googlenet_small(seed: int) -> onnx.ModelProto:
    """GoogLeNet (Inception v1) stem and modules 3a, 3b, 4a, 4b at half width."""
    net, x = b.new_net("googlenet_small", seed, SHAPE)
    x = b.conv_bn(net, x, 32, 7, "conv1", stride=2)
    x = b.maxpool(net, x, 3, 2, 1, "pool1")
    x = b.conv_bn(net, x, 32, 1, "conv2_reduce")
    x = b.conv_bn(net, x, 96, 3, "conv2")
    x = b.maxpool(net, x, 3, 2, 1, "pool2")
    x = _inception(net, x, "3a", 32, (48, 64), (8, 16), 16)
    x = _inception(net, x, "3b", 64, (64, 96), (16, 48), 32)
    x = b.maxpool(net, x, 3, 2, 1, "pool3")
    x = _inception(net, x, "4a", 96, (48, 104), (8, 24), 32)
    x = _inception(net, x, "4b", 80, (56, 112), (12, 32), 32)
    b.classifier(net, x, CLASSES)
    return b.to_model(net)


def _fire(net: b.Net, x: str, name: str, squeeze: int, expand: int) -> str:
    s = b.relu(net, b.conv(net, x, squeeze, 1, f"{name}.squeeze", bias=True), f"{name}.squeeze_relu")
    e1 = b.relu(net, b.conv(net, s, expand, 1, f"{name}.expand1x1", bias=True), f"{name}.e1_relu")
    e3 = b.relu(net, b.conv(net, s, expand, 3, f"{name}.expand3x3", bias=True), f"{name}.e3_relu")
    return b.concat(net, [e1, e3], f"{name}.concat")


def squeezenet_small(seed: int) -> onnx.ModelProto:
    """SqueezeNet 1.1 (full width) at 112x112 with a 1x1-conv classifier."""
    net, x = b.new_net("squeezenet_small", seed, SHAPE)
    x = b.relu(net, b.conv(net, x, 64, 3, "conv1", stride=2, pad=0, bias=True), "relu1")
    x = b.maxpool(net, x, 3, 2, 0, "pool1")
    x = _fire(net, x, "fire2", 16, 64)
    x = _fire(net, x, "fire3", 16, 64)
    x = b.maxpool(net, x, 3, 2, 0, "pool3")
    x = _fire(net, x, "fire4", 32, 128)
    x = _fire(net, x, "fire5", 32, 128)
    x = b.maxpool(net, x, 3, 2, 0, "pool5")
    for i, (s, e) in enumerate([(48, 192), (48, 192), (64, 256), (64, 256)]):
        x = _fire(net, x, f"fire{6 + i}", s, e)
    x = b.relu(net, b.conv(net, x, CLASSES, 1, "conv10", bias=True), "relu10")
    b.classifier(net, x, CLASSES, name="fc")
    return b.to_model(net)

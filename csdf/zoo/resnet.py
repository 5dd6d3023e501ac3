"""ResNet-50 v1 (He et al. 2016) at 224x224, 1000 classes.

Bottleneck blocks [3, 4, 6, 3] with convs without bias, each followed by BN, as in the original
Caffe model and torchvision (25.56M = conv weights + BN gamma/beta + FC). v1 puts the stride
of a downsampling block on its first 1x1 conv, as the original does (torchvision's v1.5 puts it
on the 3x3); the parameter count and all tensor shapes between blocks are the same.
"""
from __future__ import annotations

import onnx

from csdf.zoo import builder as b

_STAGES = [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]  # width, blocks, first stride
_EXPANSION = 4


def resnet50(seed: int) -> onnx.ModelProto:
    """Conv 7x7/2 + max pool 3x3/2, four stages of bottlenecks, global average pool, FC."""
    net, x = b.new_net("resnet50", seed)
    x = b.conv_bn(net, x, 64, 7, "conv1", stride=2)
    x = b.maxpool(net, x, 3, 2, 1, "maxpool")
    for stage, (width, blocks, stride) in enumerate(_STAGES, start=1):
        for i in range(blocks):
            x = _bottleneck(net, x, width, stride if i == 0 else 1, f"layer{stage}.{i}")
    b.classifier(net, x, 1000)
    return b.to_model(net)


def _bottleneck(net: b.Net, x: str, width: int, stride: int, name: str) -> str:
    """1x1 (stride) -> 3x3 -> 1x1 expand x4; projection shortcut when the shape changes."""
    cout = width * _EXPANSION
    y = b.conv_bn(net, x, width, 1, f"{name}.conv1", stride=stride)
    y = b.conv_bn(net, y, width, 3, f"{name}.conv2")
    y = b.conv_bn(net, y, cout, 1, f"{name}.conv3", act=None)
    shortcut = x
    if stride != 1 or net.shapes[x][1] != cout:
        shortcut = b.conv_bn(net, x, cout, 1, f"{name}.downsample", act=None, stride=stride)
    return b.relu(net, b.add(net, y, shortcut, f"{name}.add"), f"{name}.relu")

"""Inception V2 (BN-Inception, Ioffe & Szegedy 2015) as defined in TF-slim, at 224x224.

The TF-slim `inception_v2` network: a depthwise-separable 7x7/2 stem (depthwise multiplier 8,
no BN between the two parts), conv 1x1 and 3x3, max pools, Mixed_3b to Mixed_5c, global
average pool and a 1x1 classifier with bias to 1001 classes (TF-slim's class 0 is
"background"). Every other conv has no bias and is followed by BN and ReLU. TF-slim pads SAME;
here pads are symmetric (k // 2), which gives the same tensor shapes (224 -> 112 -> 56 -> 28
-> 14 -> 7). The classifier is Flatten + Gemm (same parameters as slim's 1x1 conv).
"""
from __future__ import annotations

import onnx

from csdf.zoo import builder as b

CLASSES = 1001


def inception_v2(seed: int) -> onnx.ModelProto:
    net, x = b.new_net("inception_v2", seed)
    # Conv2d_1a_7x7: separable conv, depthwise multiplier min(64 // 3, 8) = 8
    x = b.conv(net, x, 3 * 8, 7, "Conv2d_1a_7x7.depthwise", stride=2, group=3)
    x = b.conv_bn(net, x, 64, 1, "Conv2d_1a_7x7")
    x = b.maxpool(net, x, 3, 2, 1, "MaxPool_2a_3x3")
    x = b.conv_bn(net, x, 64, 1, "Conv2d_2b_1x1")
    x = b.conv_bn(net, x, 192, 3, "Conv2d_2c_3x3")
    x = b.maxpool(net, x, 3, 2, 1, "MaxPool_3a_3x3")
    x = _mixed(net, x, "Mixed_3b", 64, (64, 64), (64, 96), ("avg", 32))
    x = _mixed(net, x, "Mixed_3c", 64, (64, 96), (64, 96), ("avg", 64))
    x = _reduction(net, x, "Mixed_4a", (128, 160), (64, 96))
    x = _mixed(net, x, "Mixed_4b", 224, (64, 96), (96, 128), ("avg", 128))
    x = _mixed(net, x, "Mixed_4c", 192, (96, 128), (96, 128), ("avg", 128))
    x = _mixed(net, x, "Mixed_4d", 160, (128, 160), (128, 160), ("avg", 96))
    x = _mixed(net, x, "Mixed_4e", 96, (128, 192), (160, 192), ("avg", 96))
    x = _reduction(net, x, "Mixed_5a", (128, 192), (192, 256))
    x = _mixed(net, x, "Mixed_5b", 352, (192, 320), (160, 224), ("avg", 128))
    x = _mixed(net, x, "Mixed_5c", 352, (192, 320), (192, 224), ("max", 128))
    b.classifier(net, x, CLASSES, name="Logits")
    return b.to_model(net)


def _mixed(net: b.Net, x: str, name: str, c0: int, c1: tuple[int, int], c2: tuple[int, int],
           pool: tuple[str, int]) -> str:
    """Four branches: 1x1 | 1x1 -> 3x3 | 1x1 -> 3x3 -> 3x3 | pool 3x3 -> 1x1; concat on channels."""
    b0 = b.conv_bn(net, x, c0, 1, f"{name}.Branch_0.Conv2d_0a_1x1")
    b1 = b.conv_bn(net, x, c1[0], 1, f"{name}.Branch_1.Conv2d_0a_1x1")
    b1 = b.conv_bn(net, b1, c1[1], 3, f"{name}.Branch_1.Conv2d_0b_3x3")
    b2 = b.conv_bn(net, x, c2[0], 1, f"{name}.Branch_2.Conv2d_0a_1x1")
    b2 = b.conv_bn(net, b2, c2[1], 3, f"{name}.Branch_2.Conv2d_0b_3x3")
    b2 = b.conv_bn(net, b2, c2[1], 3, f"{name}.Branch_2.Conv2d_0c_3x3")
    kind, c3 = pool
    pool_fn = b.avgpool if kind == "avg" else b.maxpool
    b3 = pool_fn(net, x, 3, 1, 1, f"{name}.Branch_3.{'Avg' if kind == 'avg' else 'Max'}Pool_0a_3x3")
    b3 = b.conv_bn(net, b3, c3, 1, f"{name}.Branch_3.Conv2d_0b_1x1")
    return b.concat(net, [b0, b1, b2, b3], f"{name}.concat")


def _reduction(net: b.Net, x: str, name: str, c0: tuple[int, int], c1: tuple[int, int]) -> str:
    """Grid reduction: 1x1 -> 3x3/2 | 1x1 -> 3x3 -> 3x3/2 | max pool 3x3/2; concat on channels."""
    b0 = b.conv_bn(net, x, c0[0], 1, f"{name}.Branch_0.Conv2d_0a_1x1")
    b0 = b.conv_bn(net, b0, c0[1], 3, f"{name}.Branch_0.Conv2d_1a_3x3", stride=2)
    b1 = b.conv_bn(net, x, c1[0], 1, f"{name}.Branch_1.Conv2d_0a_1x1")
    b1 = b.conv_bn(net, b1, c1[1], 3, f"{name}.Branch_1.Conv2d_0b_3x3")
    b1 = b.conv_bn(net, b1, c1[1], 3, f"{name}.Branch_1.Conv2d_1a_3x3", stride=2)
    b2 = b.maxpool(net, x, 3, 2, 1, f"{name}.Branch_2.MaxPool_1a_3x3")
    return b.concat(net, [b0, b1, b2], f"{name}.concat")

"""DenseNet-121 (Huang et al. 2017) at 224x224, 1000 classes.

Pre-activation dense layers (BN, ReLU, conv 1x1 to 4k, BN, ReLU, conv 3x3 to k; k = 32) in
blocks of [6, 12, 24, 16], transitions (BN, ReLU, conv 1x1 halving channels, average pool
2x2/2), convs without bias: the torchvision model, whose count (conv weights + BN gamma/beta +
FC) is the published 7.98M. Each dense layer appends its k channels with one two-input
Concat (the running feature map grows block by block), as the original Caffe and the Keras
models do, rather than re-concatenating all earlier outputs.

`densenet121_tv` is the same network as torchvision writes it (`torch.onnx.export`): each
dense layer starts with its own Concat of every earlier feature map of the block (the block
input and each earlier layer's k channels), and the transition (or the final norm) reads one
more such Concat. The weights and the output are the same function; the graph has many more
edges, a tensor read by up to 25 layers (the case per-tensor buffers are for).
"""
from __future__ import annotations

import onnx

from csdf.zoo import builder as b

_BLOCKS = [6, 12, 24, 16]
_GROWTH = 32
_BOTTLENECK = 4


def densenet121(seed: int) -> onnx.ModelProto:
    """Conv 7x7/2 + BN + ReLU + max pool 3x3/2, four dense blocks with transitions, BN, ReLU, FC."""
    net, x = b.new_net("densenet121", seed)
    x = b.conv_bn(net, x, 64, 7, "features.conv0", stride=2)
    x = b.maxpool(net, x, 3, 2, 1, "features.pool0")
    for i, layers in enumerate(_BLOCKS, start=1):
        for j in range(1, layers + 1):
            x = _dense_layer(net, x, f"features.denseblock{i}.denselayer{j}")
        if i < len(_BLOCKS):
            x = _transition(net, x, f"features.transition{i}")
    x = b.relu(net, b.batchnorm(net, x, "features.norm5"), "features.relu5")
    b.classifier(net, x, 1000, name="classifier")
    return b.to_model(net)


def densenet121_tv(seed: int) -> onnx.ModelProto:
    """DenseNet-121 with torchvision's all-inputs Concat per dense layer (see the module doc)."""
    net, x = b.new_net("densenet121_tv", seed)
    x = b.conv_bn(net, x, 64, 7, "features.conv0", stride=2)
    x = b.maxpool(net, x, 3, 2, 1, "features.pool0")
    for i, layers in enumerate(_BLOCKS, start=1):
        features = [x]
        for j in range(1, layers + 1):
            name = f"features.denseblock{i}.denselayer{j}"
            joined = features[0] if len(features) == 1 else b.concat(net, features, f"{name}.cat")
            y = _bn_relu_conv(net, joined, _BOTTLENECK * _GROWTH, 1, f"{name}.1")
            features.append(_bn_relu_conv(net, y, _GROWTH, 3, f"{name}.2"))
        x = b.concat(net, features, f"features.denseblock{i}.cat")
        if i < len(_BLOCKS):
            x = _transition(net, x, f"features.transition{i}")
    x = b.relu(net, b.batchnorm(net, x, "features.norm5"), "features.relu5")
    b.classifier(net, x, 1000, name="classifier")
    return b.to_model(net)


def _bn_relu_conv(net: b.Net, x: str, cout: int, k: int, name: str) -> str:
    y = b.relu(net, b.batchnorm(net, x, f"{name}.norm"), f"{name}.relu")
    return b.conv(net, y, cout, k, f"{name}.conv")


def _dense_layer(net: b.Net, x: str, name: str) -> str:
    y = _bn_relu_conv(net, x, _BOTTLENECK * _GROWTH, 1, f"{name}.1")
    y = _bn_relu_conv(net, y, _GROWTH, 3, f"{name}.2")
    return b.concat(net, [x, y], f"{name}.concat")


def _transition(net: b.Net, x: str, name: str) -> str:
    y = _bn_relu_conv(net, x, net.shapes[x][1] // 2, 1, name)
    return b.avgpool(net, y, 2, 2, 0, f"{name}.pool")

"""The first 16 layers of YOLOv2 at 608 x 608 (Redmon & Farhadi 2016), the network of MAFAT.

Darknet's `yolov2.cfg` (and `models/yolo_cut.cfg` of the MAFAT/DeepThings code) layers 0-15:
Darknet-19's 3x3 and 1x1 convolutions, each with batch normalization and a leaky ReLU (slope
0.1), and 2x2/2 max pools after layers 0, 2, 6 and 10. Node names carry Darknet's layer index
(`conv0`, `pool1`, ..., `conv15`), so MAFAT's cuts (8, 12) and DeepThings' fused-layer counts
read the same; see docs/zoo.md. There is no classifier: the graph output `output` is layer
15's activation, [1, 256, 38, 38].
"""
from __future__ import annotations

import onnx

from csdf.zoo import builder as b

# Darknet layers 0-15: ("conv", filters, size) or ("pool",); every conv is stride 1, pad size//2
LAYERS: tuple[tuple, ...] = (
    ("conv", 32, 3), ("pool",), ("conv", 64, 3), ("pool",),
    ("conv", 128, 3), ("conv", 64, 1), ("conv", 128, 3), ("pool",),
    ("conv", 256, 3), ("conv", 128, 1), ("conv", 256, 3), ("pool",),
    ("conv", 512, 3), ("conv", 256, 1), ("conv", 512, 3), ("conv", 256, 1),
)
SIZE = 608
LEAKY = 0.1


def yolov2_16(seed: int) -> onnx.ModelProto:
    """Conv + BN + LeakyRelu(0.1) and MaxPool 2x2/2 in Darknet's order; output = layer 15."""
    net, x = b.new_net("yolov2_16", seed, (1, 3, SIZE, SIZE))
    last = len(LAYERS) - 1
    for i, spec in enumerate(LAYERS):
        if spec[0] == "pool":
            x = b.maxpool(net, x, 2, 2, 0, f"pool{i}")
            continue
        _, filters, size = spec
        y = b.batchnorm(net, b.conv(net, x, filters, size, f"conv{i}"), f"conv{i}.bn")
        x = b.leaky_relu(net, y, b.OUTPUT if i == last else f"conv{i}.leaky", LEAKY)
    return b.to_model(net)

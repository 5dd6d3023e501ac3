"""A part of a 1x1 convolution computed in the ring's own row-major layout, no transposes.

A by-parts step normally gathers its window rows from the ring ([rows, N, C, W]),
transposes them to NCHW, computes, and transposes its k output rows back to [k, N, C, W]
(deploy/parts_onnx.step_model). A 1x1 convolution with vertical stride 1 and no vertical
padding reads exactly its k output rows, one input row per output row, and mixes only
channels: [k, N, C, W] reshaped to [k*N, C, 1, W] is a batch of one-row images, and the same
Conv (horizontal stride, padding and groups as the layer's) on that batch gives
[k*N, C_out, 1, W_out], i.e. the part's [k, N, C_out, W_out] after a reshape. Both
reshapes are free, so two transposes per call go. Measured with one thread on
MobileNetV2/ResNet-50-sized 1x1 parts (k = 2..8 rows, 16-1024 channels): 5-20% less per
call, equal outputs (tests/deploy/build/test_deploy_rows.py).
"""
from __future__ import annotations

import numpy as np

from csdf.layer_attrs import WindowAttrs
from csdf.model import Layer
from deploy.steps import storage


def applies(layer: Layer, inputs: list, outputs: list, part: bool) -> bool:
    """True for a part of a 1x1 Conv (vertical stride 1, no vertical padding) that gathers
    its one input from a ring and writes only parts."""
    if not part or layer.op != "Conv" or len(inputs) != 1 or not outputs:
        return False
    win = WindowAttrs.of(layer)
    kernel, strides, pads = win.kernel, win.stride, win.pad
    port = inputs[0]
    return (kernel[0] == 1 and strides[0] == 1 and pads[0] == 0 and pads[2] == 0
            and port.rows is not None and not port.masked and not port.counted
            and all(o.part for o in outputs) and len({o.rows for o in outputs}) == 1
            and outputs[0].rows == port.rows)


def build(b, layer: Layer, port, source: str, activations) -> str:
    """The part's output [k, N, C_out, W_out] (stored as `b.dtype`) from ring input `port`,
    the output of layer `source`; adds
    the gather-index graph input's node to `b`; `activations(b, layer, x)` appends the
    layer's fused activations."""
    win = WindowAttrs.of(layer)
    n, c_in, _, w_in = port.shape
    _, c_out, _, w_out = layer.output_shape
    k = int(port.rows)
    x = b.node("Gather", [port.name, f"{port.name}_idx"], axis=0)
    x = b.node("Reshape", [x, b.const(b.tmp("shape"), np.array([k * n, c_in, 1, w_in], np.int64))])
    x = storage.load(b, x, source)
    kw, sw, dil = win.kernel[1], win.stride[1], win.dilation[1]
    pads = win.pad
    ins = [x, b.param(layer, "W")]
    if "B" in layer.params:
        ins.append(b.param(layer, "B"))
    y = b.node("Conv", ins, kernel_shape=[1, kw], strides=[1, sw], pads=[0, pads[1], 0, pads[3]],
               dilations=[1, dil], group=win.group)
    y = activations(b, layer, y)
    y = storage.store(b, y, layer.name)
    return b.node("Reshape", [y, b.const(b.tmp("shape"), np.array([k, n, c_out, w_out], np.int64))])

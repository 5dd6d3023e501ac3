"""The interface every convolution primitive implements (TASO, Wen et al. 2020, Section 3:
a library of implementations of one convolutional layer, each with its own data layout,
time and memory). A primitive writes the layer's convolution as an ONNX subgraph with
onnx.helper nodes; processing by parts stays a separate axis (a layer by parts always uses
the plain Conv). Activations, casts and storage layouts are added around it by
deploy/steps/parts.py as for any step.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from csdf.layer_attrs import WeightParams, WindowAttrs
from csdf.model import Layer
from deploy.quant.stored import held


@dataclass(frozen=True)
class ConvSpec:
    """The geometry of one Conv layer, read from the CNN model's hyper-parameters."""
    n: int
    c_in: int
    h: int
    w: int
    c_out: int
    kh: int
    kw: int
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pads: tuple[int, int, int, int]      # top, left, bottom, right
    group: int
    h_out: int
    w_out: int

    @classmethod
    def of(cls, layer: Layer, in_shape) -> "ConvSpec":
        win = WindowAttrs.of(layer)
        kh, kw = (int(v) for v in (win.kernel_shape if win.kernel_shape is not None
                                   else WeightParams.of(layer).weight.shape[2:]))
        sh, sw = win.stride
        dh, dw = win.dilation
        pads = win.pad
        n, c, h, w = (int(v) for v in in_shape)
        _, c_out, h_out, w_out = (int(v) for v in layer.output_shape)
        return cls(n, c, h, w, c_out, kh, kw, (sh, sw), (dh, dw), pads,
                   win.group, h_out, w_out)

    @property
    def padded(self) -> tuple[int, int]:
        t, left, b, r = self.pads
        return self.h + t + b, self.w + left + r


class Primitive(Protocol):
    """One implementation of a Conv layer.

    name: the key plans and profiles use. layout: the data layout it reads and writes
    ("nchw", or "nchwc": ONNX Runtime's blocked channels, deploy/ort/blocked.py).
    nchwc_kernels: whether ONNX Runtime may rewrite its Conv nodes into NCHWc kernels (the
    session's NchwcTransformer); False runs them as written."""
    name: str
    layout: str
    nchwc_kernels: bool

    def refuses(self, spec: ConvSpec) -> str | None:
        """Why this primitive cannot compute the layer, or None when it can."""

    def build(self, b, layer: Layer, spec: ConvSpec, x: str) -> str:
        """Nodes computing the Conv (with bias, without activations) on NCHW float32 `x`
        through builder `b` (deploy.steps.builder.Builder); returns the NCHW output name."""


def conv_weight(b, layer: Layer) -> np.ndarray:
    """The layer's W as a step computes with it when builder `b` stores parameters below
    fp32 (its fp16 or int8 values in fp32, deploy/quant/stored.py `held`): a primitive's
    transformed weights are made from these and kept fp32, so it computes what the
    fp16/mixed reference computes."""
    return held(b.weights, layer, "W")


def weights(b, layer: Layer, tag: str, value: np.ndarray) -> str:
    """A weight initializer, named `param:<layer>:<tag>` so the ORT backend holds one copy."""
    return b.const(f"param:{layer.name}:{tag}", np.ascontiguousarray(value, np.float32))


def add_bias(b, layer: Layer, y: str, c_out: int) -> str:
    if "B" not in layer.params:
        return y
    bias = weights(b, layer, "B4", WeightParams.of(layer).bias.astype(np.float32)
                   .reshape(1, c_out, 1, 1))
    return b.node("Add", [y, bias])


def pad(b, spec: ConvSpec, x: str, extra_bottom: int = 0, extra_right: int = 0) -> str:
    """x zero-padded by the layer's pads (plus extra rows/columns at the bottom/right)."""
    t, left, bottom, right = spec.pads
    bottom, right = bottom + extra_bottom, right + extra_right
    if not any((t, left, bottom, right)):
        return x
    pads = np.array([0, 0, t, left, 0, 0, bottom, right], np.int64)
    return b.node("Pad", [x, b.const(b.tmp("pads"), pads)], mode="constant")


def window(b, x: str, row0: int, col0: int, rows: int, cols: int, stride: tuple[int, int]) -> str:
    """x[:, :, row0 : row0 + stride*rows : stride, col0 : ... ] ([N, C, rows, cols])."""
    sh, sw = stride
    starts = np.array([row0, col0], np.int64)
    ends = np.array([row0 + sh * (rows - 1) + 1, col0 + sw * (cols - 1) + 1], np.int64)
    return b.node("Slice", [x, b.const(b.tmp("st"), starts), b.const(b.tmp("en"), ends),
                            b.const(b.tmp("ax"), np.array([2, 3], np.int64)),
                            b.const(b.tmp("sp"), np.array([sh, sw], np.int64))])


def reshape(b, x: str, shape) -> str:
    return b.node("Reshape", [x, b.const(b.tmp("shape"), np.array(list(shape), np.int64))])

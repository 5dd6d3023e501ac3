"""How a step reads and writes the tensors a deployment stores, at its precision.

Every step computes in fp32 between a load and a store:
- fp32: stored as computed;
- fp16 and mixed: an fp16 arena; a load is Cast(fp32), a store Cast(fp16);
- int8: a uint8 (or int8) arena; a load is DequantizeLinear(x, scale, zero point), a store
  QuantizeLinear(y, scale, zero point) with the stored tensor's one scale and zero point
  (deploy/quant/scales.py), the ONNX QDQ format. ONNX Runtime's QDQ transformers fuse
  DequantizeLinear -> Conv/MatMul/Add/pool -> QuantizeLinear into its quantized kernels
  (QLinearConv, ...) where the pattern is whole; elsewhere the step computes in fp32.

Rows that a step hands from one layer to the next inside one call (a region band, a fused
tile) pass through `rounded`, so they carry exactly the values the stored tensor would: the
reference rounds every layer's output (deploy/checks/rounding.py, quantized.py).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto

from deploy.quant.scales import TensorScale
from deploy.steps.builder import ONNX_TYPE, Builder


def load(b: Builder, x: str, layer: str) -> str:
    """Stored tensor `x` (the output of `layer`, stored as `b.dtype_of(layer)`) as fp32."""
    dtype = b.dtype_of(layer)
    if dtype == "float32":
        return x
    if dtype == "float16":
        return b.node("Cast", [x], to=TensorProto.FLOAT)
    s = _scale(b, layer)
    return b.node("DequantizeLinear", [x, _scale_const(b, layer, s), _zero_const(b, layer, s)])


def store(b: Builder, y: str, layer: str) -> str:
    """fp32 `y` (the output of `layer`) as it is stored."""
    dtype = b.dtype_of(layer)
    if dtype == "float32":
        return y
    if dtype == "float16":
        return b.node("Cast", [y], to=ONNX_TYPE[dtype])
    s = _scale(b, layer)
    return b.node("QuantizeLinear", [y, _scale_const(b, layer, s), _zero_const(b, layer, s)])


def rounded(b: Builder, y: str, layer: str) -> str:
    """fp32 `y` with the values its stored form holds (store, then load)."""
    if b.dtype_of(layer) == "float32":
        return y
    return load(b, store(b, y, layer), layer)


def masked_rows(b: Builder, x: str, mask: str, rows: int, layer: str, op: str) -> str:
    """Stored (int8) rows `x` [rows, N, C, W] of `layer`'s output, those that int32 0/1
    input `mask` marks 0 (padding rows) replaced by the stored form of zero, its zero point
    (for MaxPool the type's lowest value, below every real one)."""
    keep = b.node("Reshape", [b.node("Cast", [mask], to=TensorProto.BOOL),
                              b.const(b.tmp("shape"), np.array([rows, 1, 1, 1], np.int64))])
    s = _scale(b, layer)
    dtype = np.dtype(b.dtype_of(layer))
    fill = np.iinfo(dtype).min if op == "MaxPool" else s.zero_point
    return b.node("Where", [keep, x, b.const(b.tmp("fill"), np.array(fill, dtype))])


def _scale(b: Builder, layer: str) -> TensorScale:
    if b.scales is None or layer not in b.scales:
        raise KeyError(f"no quantization scale for layer {layer!r}")
    return b.scales[layer]


def _scale_const(b: Builder, layer: str, s: TensorScale) -> str:
    return b.const(f"scale:{layer}", np.array(s.scale, np.float32))


def _zero_const(b: Builder, layer: str, s: TensorScale) -> str:
    return b.const(f"zero_point:{layer}", np.array(s.zero_point, np.dtype(b.dtype_of(layer))))

"""How a deployment stores layer parameters, at the plan's parameter precision (`WEIGHT_TYPES`
from its precision name), and the fp32 values each step computes with from them (`held`): the
step models (deploy/steps/builder.py `Builder.param`) and the fp16/mixed reference
(deploy/checks/rounding.py) both take them from here, so they compute with the same values.

- "float32": as the importer made them (BatchNorm folded);
- "float16": rounded to fp16;
- "int8": symmetric int8 with one fp32 scale per output channel (axis 0, `per_channel`), or a
  QDQ model's own scales (csdf/onnx_qdq.py, `Weights.scales` by "layer:key") when the
  parameter is its ONNX tensor verbatim: q = round(W / scale) + zero point gives back the
  model's own integers.
Only multi-dimensional parameters (`stored_low`: Conv and Gemm weights, constant operands of
two or more axes) are stored so; one-dimensional ones (biases, BatchNorm's scale and shift)
stay fp32: about 1% of a CNN's parameter bytes, and an int8 scale per element would cost more
than they do.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from csdf.model import CNN, Layer
from deploy.quant.weights import per_channel

# a plan's precision (explorer/app/model.py PRECISIONS) -> how its parameters are stored
WEIGHT_TYPES = {"fp32": "float32", "fp16": "float16", "mixed": "int8", "int8": "int8"}


@dataclass(frozen=True)
class Weights:
    """How a step model stores layer parameters: `kind` "float32" | "float16" | "int8";
    `scales`: a QDQ model's weight scales by "layer:key" (csdf.onnx_qdq.Scale)."""
    kind: str = "float32"
    scales: Mapping[str, Any] = field(default_factory=dict)


FP32 = Weights()


# a precision's stored tensors (its data), fp32 and fp16; int8's type is its calibration's
DATA_TYPES = {"fp32": "float32", "fp16": "float16"}


def data_type(precision: str, quant_dtype: str | None) -> str:
    """The element type a tensor at `precision` (fp32, fp16, int8) is stored in; int8's is
    `quant_dtype`, its calibrated 8-bit type (deploy/quant/scales.py)."""
    if precision == "int8":
        if quant_dtype is None:
            raise ValueError("an int8 tensor is stored with its calibrated scale")
        return quant_dtype
    return DATA_TYPES[precision]


def weights_for(precision: str) -> str:
    """The storage of parameters at a plan's parameter `precision` (`WEIGHT_TYPES`; float32
    for a name it lacks): what a backend that stores them at the plan's precision keeps
    (each backend says what it stores: deploy/backends/, `stored_weights`)."""
    return WEIGHT_TYPES.get(precision, "float32")


def weights_of(kind: str, cnn: CNN | None = None) -> Weights:
    """The storage of `cnn`'s parameters at `kind`, with its own scales when it is a QDQ model."""
    if kind not in ("float32", "float16", "int8"):
        raise ValueError(f"weights: expected float32, float16 or int8, got {kind!r}")
    found = getattr(cnn, "quantized", None)
    return Weights(kind, dict(found.weights) if found is not None and kind == "int8" else {})


def stored_low(value: np.ndarray) -> bool:
    """Whether a parameter is stored at the plan's precision (else fp32): two or more axes."""
    return value.ndim >= 2 and value.size > 1


def quantized(value: np.ndarray, scale: Any | None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, int]:
    """(q, scale, zero point or None, axis) of parameter `value`: with `scale` (a QDQ model's
    csdf.onnx_qdq.Scale) its own, q = round(value / scale) + zero point, which recovers the
    model's integers; else symmetric int8 per output channel (`per_channel`)."""
    if scale is None:
        q, s = per_channel(value)
        return q, s, None, 0
    dtype = np.dtype(scale.dtype)
    axis = 0 if scale.axis is None else int(scale.axis) % value.ndim
    shape = [1] * value.ndim
    if len(scale.scale) > 1:
        shape[axis] = -1
    s = np.asarray(scale.scale, np.float32)
    zp = np.asarray(scale.zero_point, np.int64)
    info = np.iinfo(dtype)
    q = np.clip(np.rint(value / s.reshape(shape)) + zp.reshape(shape), info.min, info.max).astype(dtype)
    if len(scale.scale) == 1:      # one scale for the tensor: 0-d scale and zero point, no axis
        return q, s.reshape(()), zp.astype(dtype).reshape(()), axis
    return q, s, zp.astype(dtype), axis


def held(weights: Weights, layer: Layer, key: str) -> np.ndarray:
    """The fp32 values a step computes with for `layer`'s parameter `key` stored as `weights`
    says (`Builder.param`): what the fp16 or int8 reference computes with too
    (deploy/checks/rounding.py)."""
    value = np.asarray(layer.params[key], np.float32)
    if weights.kind == "float32" or not stored_low(value):
        return value
    if weights.kind == "float16":
        return value.astype(np.float16).astype(np.float32)
    source = layer.param_sources.get(key)
    scale = weights.scales.get(f"{layer.name}:{key}") if source else None
    q, s, zp, axis = quantized(value, scale)
    shape = [1] * value.ndim
    if s.ndim == 1:
        shape[axis] = -1
    zero = np.zeros((), np.float32) if zp is None else zp.astype(np.float32).reshape(shape)
    return ((q.astype(np.float32) - zero) * s.reshape(shape)).astype(np.float32)

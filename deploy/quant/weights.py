"""Weights held in one byte: symmetric int8 per output channel (axis 0), the scheme ONNX
Runtime's quantize_static uses for Conv weights with `per_channel=True` (ONNX Runtime docs,
"Quantize ONNX models"; onnxruntime.quantization.quant_utils.quantize_data computes each
channel's scale max|w| / 127 and zero point 0).

The step models dequantize them with DequantizeLinear(q, scale, axis=0); the int8 reference
(deploy/checks) dequantizes the same arrays, so both compute with the same weight values.

>>> import numpy as np
>>> q, s = per_channel(np.array([[1.0, -0.5], [0.25, 0.125]], np.float32))
>>> q.tolist(), [round(float(v) * 127, 6) for v in s]
([[127, -64], [127, 64]], [1.0, 0.25])
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto
from onnxruntime.quantization.quant_utils import quantize_data


def per_channel(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`w` ([C_out, ...], float) as int8 values and one fp32 scale per output channel, zero
    points 0: w ~= q * scale[:, None, ...]. A channel of zeros gets scale 1."""
    w = np.asarray(w, np.float32)
    q = np.empty(w.shape, np.int8)
    scale = np.empty(w.shape[0], np.float32)
    for c in range(w.shape[0]):
        _, s, values = quantize_data(w[c].ravel(), TensorProto.INT8, True)
        s = float(s)
        scale[c] = s if s > 0 else 1.0
        q[c] = np.asarray(values, np.int8).reshape(w.shape[1:])
    return q, scale


def dequantized(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The fp32 values DequantizeLinear(q, scale, axis=0) computes."""
    shape = (-1,) + (1,) * (q.ndim - 1)
    return q.astype(np.float32) * scale.reshape(shape)

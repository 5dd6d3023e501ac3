"""Whether ONNX Runtime's integer kernels can hold a layer's bias: its QDQ fusion
(DequantizeLinear -> Conv/Gemm -> QuantizeLinear into QLinearConv / QGemm, ONNX Runtime's
"QDQ" graph transformers) quantizes an fp32 bias to int32 at scale input scale x weight
scale, per output channel, the scale QLinearConv's bias input must have (ONNX operator
QLinearConv: "bias ... quantized with scale = x_scale * w_scale, zero point 0"). A legal
but extreme activation scale (1e-30 on a tensor of values near 1: a QDQ model says so)
makes |B| / (x_scale * w_scale) pass int32's range, and the fused kernel then computes
with a wrapped bias, far from what the QDQ model means. Such a layer's step adds its bias
after the Conv/Gemm (deploy/steps/builder.py `Builder.weighted`), which keeps ONNX Runtime
from fusing it: the layer computes in fp32 between DequantizeLinear and QuantizeLinear, as
the QDQ model's own definition does.
"""
from __future__ import annotations

import numpy as np

INT32_MAX = float(np.iinfo(np.int32).max)


def weight_scales(w: np.ndarray, scale) -> np.ndarray:
    """The per-output-channel scales of weight `w` held in int8: a QDQ model's own
    (`scale`, csdf.onnx_qdq.Scale, per tensor or along axis 0), else symmetric per channel,
    max |w_c| / 127 (deploy/quant/weights.py `per_channel`; 1 for a channel of zeros)."""
    w = np.asarray(w, np.float32)
    if scale is not None and (len(scale.scale) == 1 or scale.axis in (0, None)):
        return np.broadcast_to(np.asarray(scale.scale, np.float64), (w.shape[0],))
    peak = np.abs(w.reshape(w.shape[0], -1)).max(axis=1).astype(np.float64) / 127.0
    return np.where(peak > 0, peak, 1.0)


def bias_fits(bias: np.ndarray, x_scale: float, w_scales: np.ndarray) -> bool:
    """Whether `bias` quantized at scale x_scale * w_scales (per output channel) fits int32."""
    step = float(x_scale) * np.asarray(w_scales, np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        held = np.abs(np.asarray(bias, np.float64).reshape(-1)) / step
    return bool(np.all(np.isfinite(held)) and held.max(initial=0.0) <= INT32_MAX)

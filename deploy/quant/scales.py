"""The scale and zero point of every tensor an int8 deployment stores: one per tensor, which
every reader, part and ring slot of it shares.

An int8 deployment stores each CNN's input and every layer's output in one byte,
x_q = clamp(round(x / scale) + zero_point) (ONNX QuantizeLinear), and its steps read them
back as (x_q - zero_point) * scale (DequantizeLinear). The scales come from calibration
frames (deploy/quant/calibration.py) or, for a model already quantized, from its own
QuantizeLinear nodes (csdf/onnx_qdq.py `Quantized.activations`); `origins` says which, per CNN
(deploy/quant/origin.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from deploy.quant.origin import ScalesOrigin
from sdf3.errors import InputError

DTYPES = ("uint8", "int8")


@dataclass(frozen=True)
class TensorScale:
    scale: float
    zero_point: int


@dataclass(frozen=True)
class ActivationScales:
    """`dtype`: the stored integer type; `by_tensor`: "cnn/layer" -> its output's scale (a
    CNN's input layer included), and for a QDQ model's points inside fused layers
    "cnn/layer@act<i>" / "cnn/layer@gate<i>" (csdf/onnx_qdq.py `inner_key`), where its steps
    round without storing; `origins`: per CNN where its scales came from (not part of what
    two records compare: the same scales are the same, however found)."""
    dtype: str
    by_tensor: Mapping[str, TensorScale] = field(default_factory=dict)
    origins: Mapping[str, ScalesOrigin] = field(default_factory=dict, compare=False)

    def for_cnn(self, cnn: str) -> dict[str, TensorScale]:
        """CNN `cnn`'s scales by layer, as its step models take them."""
        prefix = key(cnn, "")
        return {k[len(prefix):]: v for k, v in self.by_tensor.items() if k.startswith(prefix)}

    def of(self, cnn: str, layer: str) -> TensorScale:
        return self.by_tensor[key(cnn, layer)]

    def quantize(self, cnn: str, layer: str, x: np.ndarray) -> np.ndarray:
        """`x` as QuantizeLinear stores it (round half to even, saturated)."""
        s = self.of(cnn, layer)
        info = np.iinfo(self.dtype)
        q = np.divide(np.asarray(x, np.float32), np.float32(s.scale), dtype=np.float32)
        np.rint(q, out=q)             # in place: a frame's copy per step, not four
        q += np.float32(s.zero_point)
        np.clip(q, info.min, info.max, out=q)
        return q.astype(self.dtype)

    def dequantize(self, cnn: str, layer: str, q: np.ndarray) -> np.ndarray:
        s = self.of(cnn, layer)
        return (q.astype(np.float32) - np.float32(s.zero_point)) * np.float32(s.scale)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dtype": self.dtype, "tensors": {
            k: [v.scale, v.zero_point] for k, v in sorted(self.by_tensor.items())}}
        if self.origins:
            out["origins"] = {cnn: o.to_json() for cnn, o in self.origins.items()}
        return out

    @classmethod
    def from_json(cls, data: Any, where: str) -> "ActivationScales":
        if not isinstance(data, dict) or data.get("dtype") not in DTYPES \
                or not isinstance(data.get("tensors"), dict):
            raise InputError(f"{where}: key 'quantization' must hold 'dtype' ({' or '.join(DTYPES)}) "
                             f"and 'tensors' (name -> [scale, zero point])")
        out = {}
        for name, value in data["tensors"].items():
            if not (isinstance(value, list) and len(value) == 2 and isinstance(value[1], int)
                    and isinstance(value[0], (int, float)) and value[0] > 0):
                raise InputError(f"{where}: key 'quantization.tensors.{name}' must be "
                                 f"[scale > 0, integer zero point], got {value!r}")
            out[name] = TensorScale(float(value[0]), int(value[1]))
        origins = data.get("origins", {})
        if not isinstance(origins, dict):
            raise InputError(f"{where}: key 'quantization.origins' must map CNN names to where "
                             f"their scales came from")
        return cls(data["dtype"], out, {cnn: ScalesOrigin.from_json(o, f"{where}: key "
                                                                    f"'quantization.origins.{cnn}'")
                                        for cnn, o in origins.items()})


def key(cnn: str, layer: str) -> str:
    return f"{cnn}/{layer}"

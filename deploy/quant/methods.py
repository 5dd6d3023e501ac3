"""The calibration methods an int8 deployment's activation ranges can come from: ONNX Runtime's
own calibrators (onnxruntime.quantization.calibrate.create_calibrator), each with the settings
quantize_static gives it by default, so a tensor's range is the one ONNX Runtime's static
quantization would find on the same frames.

- minmax: the smallest and largest value seen over all frames (MinMaxCalibrater).
- entropy: the threshold of a 128-bin histogram that keeps the quantized distribution closest
  to the float one in KL divergence (EntropyCalibrater; TensorRT's int8 calibration, Migacz,
  "8-bit Inference with TensorRT", GTC 2017).
- percentile: the 99.999th percentile of |x| over a 2048-bin histogram, as a symmetric range
  [-t, t] (PercentileCalibrater).

The histogram methods hold every calibrated tensor of every frame at once before binning them
(ONNX Runtime's HistogramCalibrater.collect_data), so they take memory in proportion to the
frames given; minmax keeps two numbers per tensor.
"""
from __future__ import annotations

from dataclasses import dataclass

from sdf3.errors import InputError


@dataclass(frozen=True)
class Method:
    """A calibration method: its name on the command line, the member of ONNX Runtime's
    CalibrationMethod it runs, and a few words for messages."""
    name: str
    ort_member: str
    words: str

    def ort_method(self):
        """ONNX Runtime's CalibrationMethod member."""
        from onnxruntime.quantization.calibrate import CalibrationMethod
        return getattr(CalibrationMethod, self.ort_member)


METHODS = {m.name: m for m in (
    Method("minmax", "MinMax", "MinMax (the range seen)"),
    Method("entropy", "Entropy", "Entropy (KL-divergence threshold)"),
    Method("percentile", "Percentile", "Percentile (99.999th of |x|, symmetric)"),
)}
DEFAULT = "minmax"


def names() -> list[str]:
    return list(METHODS)


def method(name: str | None, where: str = "calibration method") -> Method:
    """The method named `name` (None: DEFAULT), or one line naming those there are."""
    if name is None:
        return METHODS[DEFAULT]
    found = METHODS.get(str(name).lower()) if isinstance(name, str) else None
    if found is None:
        raise InputError(f"{where}: unknown calibration method {name!r}, expected one of "
                         f"{', '.join(METHODS)}")
    return found

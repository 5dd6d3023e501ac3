"""The calibration methods an int8 deployment's activation ranges can come from: ONNX Runtime's
own calibrators (onnxruntime.quantization.calibrate.create_calibrator), so a tensor's range is
the one ONNX Runtime's calibrator finds on the same frames with the same options.

- minmax: the smallest and largest value seen over all frames (MinMaxCalibrater; quantize_static's
  default).
- entropy: the threshold that keeps the quantized distribution closest to the float one in KL
  divergence (EntropyCalibrater; Migacz, "8-bit Inference with TensorRT", GTC 2017), over a
  512-bin histogram of x folded into 128 quantized bins: thresholds from a quarter of the
  largest |x| to all of it, in 192 steps. ONNX Runtime's own default of 128 bins leaves one
  candidate threshold, the whole range, so that its Entropy equals MinMax
  (tests/deploy/quant/test_calibration.py); quantize_static cannot change that (its
  extra_options pass no bin count), create_calibrator can. TensorRT's 2048 bins cost ONNX
  Runtime's Python search 4 s a tensor on the 2-core VM (loaded), 20 times 512 bins' cost.
- percentile: the 99.999th percentile of |x| over a 2048-bin histogram, as the range [-t, t]
  clipped to the values seen (PercentileCalibrater, quantize_static's defaults).

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
    CalibrationMethod it runs, a few words for messages, and the `extra_options` it gives
    create_calibrator (as (key, value) pairs)."""
    name: str
    ort_member: str
    words: str
    options: tuple[tuple[str, object], ...] = ()

    def extra_options(self) -> dict:
        return dict(self.options)

    def ort_method(self):
        """ONNX Runtime's CalibrationMethod member."""
        from onnxruntime.quantization.calibrate import CalibrationMethod
        return getattr(CalibrationMethod, self.ort_member)


METHODS = {m.name: m for m in (
    Method("minmax", "MinMax", "MinMax (the range seen)"),
    Method("entropy", "Entropy", "Entropy (KL-divergence threshold)",
           (("num_bins", 512), ("num_quantized_bins", 128))),
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

"""Activation scales of an int8 deployment: the range of every tensor it stores over frames of
input, found by one of ONNX Runtime's own calibrators (MinMax, Entropy, Percentile:
deploy/quant/methods.py), and each tensor's uint8 scale and zero point as ONNX Runtime's
quantize_static computes them from that range (asymmetric, the range widened to hold 0:
onnxruntime.quantization.quant_utils.compute_scale_zp).

The frames come from `explore deploy --calibration FILE` (`frames`: a .npy or .npz of real
input) or, without a file, are seeded standard-normal frames, with a warning line: scales from
such frames fit what real input will not. A model already quantized (QDQ) brings its own
scales (`qdq_scales`) and needs no calibration.

Two of quantize_static's adjustments are left out on purpose: it gives the input of a Relu or
Clip the range of that activation's output and a Softmax output the range [0, 1]. memtrade
stores the tensor after an activation fused into its layer (a Relu that is a layer of its own
reads the whole range of what it is given), so every stored tensor keeps its own range.
"""
from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import onnx
from onnx import TensorProto

from csdf.model import CNN
from deploy.quant.frame_values import check_values
from deploy.quant.methods import method as calibration_method
from deploy.quant.origin import ScalesOrigin
from deploy.quant.scales import ActivationScales, TensorScale, key
from sdf3.errors import InputError

S8_TO_U8 = 128      # an int8 zero point's uint8 twin: q_u8 = q_s8 + 128 for every value
WARNING = ("calibration: no --calibration file; scales from {n} generated frames, which real "
           "input will not match: give frames of real input")


def frames(path: Path | None, shape: tuple[int, ...], count: int = 16,
           seed: int = 0) -> tuple[list[np.ndarray], str | None]:
    """Frames of input, each float32 of `shape` ([N, C, H, W]), and a warning line for the
    CLI (None when the frames came from `path`).

    A .npy holds one array: one frame ([N, C, H, W]), frames [F, N, C, H, W], or, when N is
    1, frames [F, C, H, W]. A .npz holds any number of such arrays; their frames are taken in
    the file's order. Values must be floating point (float16/32/64). `path` None: `count`
    standard-normal frames drawn from `seed`."""
    shape = tuple(int(d) for d in shape)
    if path is None:
        rng = np.random.default_rng(seed)
        made = [rng.standard_normal(shape, dtype=np.float32) for _ in range(count)]
        return made, WARNING.format(n=count)
    path = Path(path)
    if path.suffix not in (".npy", ".npz"):
        raise InputError(f"{path}: calibration file of type '{path.suffix or 'none'}', expected "
                         f".npy or .npz frames of input {_dims(shape)}")
    if not path.is_file():
        raise InputError(f"{path}: calibration file not found, expected .npy or .npz frames "
                         f"of input {_dims(shape)}")
    try:
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.ndarray):
            arrays = [("", loaded)]
        else:             # a .npz: every array it holds, in the file's order
            with loaded:
                arrays = [(name, loaded[name]) for name in loaded.files]
    except Exception as err:     # not a NumPy file, truncated, pickled objects
        raise InputError(f"{path}: not a readable {path.suffix} file ({' '.join(str(err).split())[:200]}), "
                         f"expected frames of input {_dims(shape)}") from None
    out: list[np.ndarray] = []
    for name, array in arrays:
        out += _split(path, name, array, shape)
    if not out:
        raise InputError(f"{path}: no frames (no arrays or an array of 0 frames), expected at "
                         f"least one frame of input {_dims(shape)}")
    return out, None


def _split(path: Path, name: str, array: np.ndarray, shape: tuple[int, ...]) -> list[np.ndarray]:
    """The frames of one array, each float32 of `shape`."""
    where = f"{path}: array '{name}'" if name else f"{path}: array"
    if array.dtype.kind != "f":
        raise InputError(f"{where} of dtype {array.dtype}, expected floating point frames "
                         f"(float16, float32 or float64) of input {_dims(shape)}")
    if array.shape == shape:
        found = array.reshape((1,) + shape)
    elif array.ndim == len(shape) + 1 and array.shape[1:] == shape:
        found = array
    elif shape[0] == 1 and array.ndim == len(shape) and array.shape[1:] == shape[1:]:
        found = array.reshape((array.shape[0],) + shape)
    else:
        forms = [_dims(shape), f"[F, {_dims(shape)[1:]}"] + ([f"[F, {_dims(shape[1:])[1:]}"] if shape[0] == 1 else [])
        forms = ", ".join(forms[:-1]) + " or " + forms[-1]
        raise InputError(f"{where} of shape {_dims(array.shape)}, expected {forms} "
                         f"(one frame or F frames of input {_dims(shape)})")
    check_values(found, where)      # before the cast: a float64 1e300 would become inf
    return [np.ascontiguousarray(f, dtype=np.float32) for f in found]


def _dims(shape: Iterable[int]) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


def stored(cnn: CNN, model: onnx.ModelProto) -> dict[str, str]:
    """The float tensors a deployment of `cnn` stores, ONNX tensor -> the layer whose output
    it is (each CNN input layer included): `Layer.output_tensor` of every layer, the first
    layer that names a tensor keeping it."""
    typed = onnx.shape_inference.infer_shapes(model)
    kinds = {v.name: v.type.tensor_type.elem_type
             for v in list(typed.graph.input) + list(typed.graph.value_info) + list(typed.graph.output)}
    out: dict[str, str] = {}
    for layer in cnn.layers():
        t = layer.output_tensor
        if t and t not in out and kinds.get(t) == TensorProto.FLOAT:
            out[t] = layer.name
    return out


def activation_scales(model_path: str | Path, cnn: CNN, frames: list, name: str | None = None,
                      frames_from: str | None = None, method: str | None = None,
                      origin: ScalesOrigin | None = None) -> ActivationScales:
    """The uint8 scale and zero point of every tensor a deployment of `cnn` stores (keys
    "cnn/layer", cnn `name`, else `cnn.name`), from the range ONNX Runtime's calibrator of
    `method` (deploy/quant/methods.py, with that method's options; None: minmax) finds over
    `frames` on the model at `model_path` (`cnn` is its import).
    A frame is an array for the model's one input, or a dict input name -> array. `origin`:
    where the frames came from, kept with the scales (its method set to `method`).

    ONNX Runtime's MinMax calibrator is first given one frame at a time (its ranges merge by
    min and max, so the result is that of all the frames at once), and a frame that drives a
    stored tensor beyond float32's range (finite input, an infinite output) is refused naming
    the frame (`frames_from`: where the frames came from, default the model): the histogram
    calibrators cannot bin an infinite value. Those ranges are the answer for minmax; another
    method's calibrator then reads all the frames."""
    from dataclasses import replace

    from onnxruntime.quantization.calibrate import (CalibrationDataReader, CalibrationMethod,
                                                    create_calibrator)
    from onnxruntime.quantization.quant_utils import compute_scale_zp, get_qmin_qmax_for_qType

    from csdf.onnx_inputs import with_shapes

    chosen = calibration_method(method)
    model = onnx.load(str(model_path))
    with_shapes(model, dict(cnn.input_shapes))
    tensors = stored(cnn, model)
    weights = {t.name for t in model.graph.initializer}
    ports = [v.name for v in model.graph.input if v.name not in weights]
    feeds = [f if isinstance(f, Mapping) else {ports[0]: f} for f in frames]
    if not feeds:
        raise InputError(f"{model_path}: no calibration frames, expected at least one")

    class Reader(CalibrationDataReader):
        def __init__(self, *feed):
            self.left = iter(feed)

        def get_next(self):
            return next(self.left, None)

    with tempfile.TemporaryDirectory(prefix="memtrade_calib_") as tmp:
        source = Path(tmp) / "model.onnx"
        onnx.save(model, str(source))
        calibrator = create_calibrator(source, augmented_model_path=str(Path(tmp) / "augmented.onnx"),
                                       calibrate_method=CalibrationMethod.MinMax)
        for i, feed in enumerate(feeds):
            calibrator.collect_data(Reader(feed))
            _finite_ranges(calibrator.compute_data(), tensors, frames_from or str(model_path), i)
        ranges = calibrator.compute_data()
        del calibrator    # its session holds the augmented model's file open
        if chosen.ort_method() != CalibrationMethod.MinMax:
            calibrator = create_calibrator(source, augmented_model_path=str(Path(tmp) / "histogram.onnx"),
                                           calibrate_method=chosen.ort_method(),
                                           extra_options=chosen.extra_options())
            with contextlib.redirect_stdout(io.StringIO()):   # the histogram ones print progress
                calibrator.collect_data(Reader(*feeds))
                ranges = calibrator.compute_data()
            del calibrator
    qmin, qmax = get_qmin_qmax_for_qType(TensorProto.UINT8)
    cnn_name = name or cnn.name
    by_tensor = {}
    for tensor, layer in tensors.items():
        if tensor not in ranges.data:
            raise InputError(f"{model_path}: ONNX Runtime's calibrator found no range for tensor "
                             f"'{tensor}' (output of layer '{layer}'), expected one for every stored tensor")
        lo, hi = ranges.data[tensor].range_value
        zero, scale = compute_scale_zp(lo, hi, qmin, qmax, symmetric=False)   # one value each
        by_tensor[key(cnn_name, layer)] = TensorScale(float(np.squeeze(scale)), int(np.squeeze(zero)))
    origin = replace(origin or ScalesOrigin("file", count=len(feeds)), method=chosen.name)
    return ActivationScales("uint8", by_tensor, {cnn_name: origin})


def _finite_ranges(ranges, tensors: Mapping[str, str], where: str, frame: int) -> None:
    """The ranges found after frame `frame` are finite for every stored tensor."""
    for tensor, layer in tensors.items():
        found = ranges.data.get(tensor) if tensor in ranges.data else None
        if found is None:
            continue
        lo, hi = (float(np.squeeze(v)) for v in found.range_value)
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise InputError(f"{where}: frame {frame} drives tensor '{tensor}' (output of layer "
                             f"'{layer}') beyond float32's range ({lo:g} to {hi:g}); expected "
                             f"frames of the values the model is meant for")


def merged(parts: Iterable[ActivationScales]) -> ActivationScales:
    """The scales of several CNNs (each from `activation_scales` or `qdq_scales`) as one
    record, for a deployment of them all: one stored type (uint8 or int8) for every CNN."""
    parts = list(parts)
    dtypes = sorted({p.dtype for p in parts})
    if len(dtypes) > 1:
        raise InputError(f"activation scales stored as {' and '.join(dtypes)}, expected one type "
                         f"for every CNN of a deployment")
    return ActivationScales(dtypes[0] if dtypes else "uint8",
                            {k: v for p in parts for k, v in p.by_tensor.items()},
                            {k: v for p in parts for k, v in p.origins.items()})


def qdq_scales(cnn: CNN, name: str | None = None) -> ActivationScales | None:
    """The scales a model already quantized (QDQ) holds for the tensors between its layers
    (csdf/onnx_qdq.py: `cnn.quantized.activations`, by layer), keys "cnn/layer", and for
    its points inside fused layers (`cnn.quantized.inner`), keys "cnn/layer@point", where a
    step rounds as the model does; None for a model that is not quantized. Layers with no
    QuantizeLinear on their output are absent (the model computes them in fp32). One stored
    type and one scale per tensor: a model mixing int8 and uint8 activations, or with a per-channel activation scale, is refused.

    int8 activations are held as uint8, zero point + 128: the same values, as ONNX Runtime
    itself converts a model's int8 QuantizeLinear -> DequantizeLinear pairs before it fuses
    them into its integer kernels (its QDQS8ToU8Transformer). A step reads its inputs from
    the arena, with no pair to convert, and ONNX Runtime 1.31.1 on x86-64 fuses
    DequantizeLinear -> Conv -> QuantizeLinear on uint8 data only: held as int8, a step's
    Conv ran in fp32 where the model's ran as QLinearConv, and rounded an element the other
    way now and then (docs/precision.md)."""
    found = getattr(cnn, "quantized", None)
    if found is None:
        return None
    where = cnn.source or cnn.name
    acts = {**found.activations, **found.inner}
    dtypes = sorted({s.dtype for s in acts.values()})
    if len(dtypes) > 1:
        raise InputError(f"{where}: QDQ activations stored as {' and '.join(dtypes)}, expected one "
                         f"type (uint8 or int8) for every tensor between layers")
    if dtypes and dtypes[0] not in ("uint8", "int8"):
        raise InputError(f"{where}: QDQ activations stored as {dtypes[0]}, expected uint8 or int8")
    by_tensor = {}
    for layer, s in acts.items():
        if s.axis is not None or len(s.scale) != 1 or len(s.zero_point) != 1:
            raise InputError(f"{where}: layer '{layer}': per-channel activation scale ({len(s.scale)} "
                             f"values on axis {s.axis}), expected one scale and zero point per tensor")
        shift = S8_TO_U8 if s.dtype == "int8" else 0
        by_tensor[key(name or cnn.name, layer)] = TensorScale(float(s.scale[0]), int(s.zero_point[0]) + shift)
    return ActivationScales("uint8", by_tensor, {name or cnn.name: ScalesOrigin("model")})

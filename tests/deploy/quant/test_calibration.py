"""Calibration of an int8 deployment (deploy/quant/calibration.py): frames read from .npy/.npz
files (each bad file refused in one line), the scale and zero point of every stored tensor
equal to those ONNX Runtime's quantize_static writes for the same model and frames, and a QDQ
model's own scales read back."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper as nh

from csdf.onnx_import import load_onnx
from csdf.onnx_qdq import Quantized, Scale
from deploy.quant import calibration, methods
from deploy.quant.origin import ScalesOrigin
from deploy.quant.scales import TensorScale
from sdf3.errors import InputError
from test_onnx_qdq import SHAPE, fp32_model

quantization = pytest.importorskip("onnxruntime.quantization")

FRAME = (1, 3, 4, 5)


def _refused(path, shape=FRAME, *words) -> str:
    with pytest.raises(InputError) as err:
        calibration.frames(path, shape)
    line = str(err.value)
    assert "\n" not in line and str(path) in line, line
    for w in words:
        assert w in line, (w, line)
    return line


def test_each_bad_file_is_one_line_naming_what_was_found_and_expected(tmp_path):
    want = "[1, 3, 4, 5]"
    _refused(tmp_path / "absent.npy", FRAME, "not found", want)
    (tmp_path / "frames.txt").write_text("1 2 3")
    _refused(tmp_path / "frames.txt", FRAME, "'.txt'", ".npy or .npz")
    np.save(tmp_path / "shape.npy", np.zeros((2, 3, 5, 4), np.float32))
    _refused(tmp_path / "shape.npy", FRAME, "[2, 3, 5, 4]", want)
    np.save(tmp_path / "ints.npy", np.zeros((2, 3, 4, 5), np.int64))
    _refused(tmp_path / "ints.npy", FRAME, "int64", "floating point")
    np.save(tmp_path / "empty.npy", np.zeros((0, 3, 4, 5), np.float32))
    _refused(tmp_path / "empty.npy", FRAME, "no frames")
    np.savez(tmp_path / "none.npz")
    _refused(tmp_path / "none.npz", FRAME, "no frames")
    np.savez(tmp_path / "mixed.npz", good=np.zeros(FRAME, np.float32), bad=np.zeros((3, 4, 5), np.float32))
    _refused(tmp_path / "mixed.npz", FRAME, "array 'bad'", "[3, 4, 5]")
    (tmp_path / "junk.npy").write_bytes(b"not numpy at all")
    _refused(tmp_path / "junk.npy", FRAME, "not a readable .npy")
    np.save(tmp_path / "nan.npy", np.full(FRAME, np.nan, np.float32))
    _refused(tmp_path / "nan.npy", FRAME, "NaN")
    # [F, C, H, W] only when one frame is one image: with N = 2 it is a wrong shape
    np.save(tmp_path / "batch.npy", np.zeros((5, 3, 4, 5), np.float32))
    _refused(tmp_path / "batch.npy", (2, 3, 4, 5), "[5, 3, 4, 5]", "[F, 2, 3, 4, 5]")


def test_frames_of_each_form_are_the_file_s_values_in_order(tmp_path):
    rng = np.random.default_rng(1)
    many = rng.standard_normal((3, 3, 4, 5))                  # float64 [F, C, H, W]
    np.save(tmp_path / "fchw.npy", many)
    got, warning = calibration.frames(tmp_path / "fchw.npy", FRAME)
    assert warning is None and len(got) == 3
    for k in range(3):
        assert got[k].dtype == np.float32 and got[k].shape == FRAME
        np.testing.assert_array_equal(got[k], many[k][None].astype(np.float32))
    one = rng.standard_normal(FRAME).astype(np.float16)
    five = rng.standard_normal((2, *FRAME)).astype(np.float32)
    np.savez(tmp_path / "all.npz", one=one, five=five)
    got, _ = calibration.frames(tmp_path / "all.npz", FRAME)
    assert len(got) == 3
    np.testing.assert_array_equal(got[0], one.astype(np.float32))
    np.testing.assert_array_equal(got[1], five[0])
    np.testing.assert_array_equal(got[2], five[1])


def test_without_a_file_seeded_normal_frames_and_a_warning():
    got, warning = calibration.frames(None, FRAME, count=5, seed=3)
    again, _ = calibration.frames(None, FRAME, count=5, seed=3)
    other, _ = calibration.frames(None, FRAME, count=5, seed=4)
    assert len(got) == 5 and all(f.shape == FRAME and f.dtype == np.float32 for f in got)
    assert all(np.array_equal(a, b) for a, b in zip(got, again))
    assert not np.array_equal(got[0], other[0])
    assert "\n" not in warning and "5 generated frames" in warning and "--calibration" in warning


def _frames(count: int = 6) -> list[np.ndarray]:
    return [np.random.default_rng(10 + i).standard_normal(SHAPE, dtype=np.float32) * (1 + i)
            for i in range(count)]


def ort_quantized(fp32: Path, frames: list[np.ndarray], out: Path, method: str = "MinMax") -> Path:
    """ONNX Runtime's own static quantization of `fp32` (QDQ, uint8 activations, per-channel
    int8 weights) calibrated on `frames` by its calibrator `method` (CalibrationMethod member)."""
    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.left = iter([{"input": f} for f in frames])

        def get_next(self):
            return next(self.left, None)

    quantization.quantize_static(str(fp32), str(out), Reader(), quant_format=quantization.QuantFormat.QDQ,
                                 activation_type=quantization.QuantType.QUInt8,
                                 weight_type=quantization.QuantType.QInt8, per_channel=True,
                                 calibrate_method=getattr(quantization.CalibrationMethod, method))
    return out


def _q_nodes(model: onnx.ModelProto) -> dict[str, TensorScale]:
    """The scale and zero point of each activation QuantizeLinear, by the tensor it stands
    for (a graph output's pair: the output's own name)."""
    init = {t.name: nh.to_array(t) for t in model.graph.initializer}
    outputs = {o.name for o in model.graph.output}
    out = {}
    for q in model.graph.node:
        if q.op_type != "QuantizeLinear" or q.input[0] in init:
            continue
        dq = [n.output[0] for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] == q.output[0]]
        name = dq[0] if dq and dq[0] in outputs else q.input[0]
        out[name] = TensorScale(float(init[q.input[1]]), int(init[q.input[2]]))
    return out


@pytest.mark.parametrize("method", [m for m in methods.names() if not methods.method(m).options])
def test_scales_equal_those_quantize_static_writes(tmp_path, method):
    """The small network (conv + Relu, depthwise stride 2 + Relu, residual Add, Concat), for
    each calibration method run with quantize_static's own settings: the QuantizeLinear of
    every stored tensor in ONNX Runtime's QDQ model calibrated by that method has our scale
    and zero point, bit for bit; a Relu fused into its conv is removed by quantize_static,
    whose conv then writes the Relu's output name."""
    fp32 = fp32_model(tmp_path / "fp32.onnx")
    frames = _frames()
    cnn = load_onnx(fp32, "net")
    ours = calibration.activation_scales(fp32, cnn, frames, method=method)
    chosen = methods.method(method)
    theirs = _q_nodes(onnx.load(str(ort_quantized(fp32, frames, tmp_path / "qdq.onnx", chosen.ort_member))))
    assert ours.origins["net"] == ScalesOrigin("file", method, len(frames))
    stored = {layer.output_tensor: layer.name for layer in cnn.layers()}
    assert ours.dtype == "uint8" and set(ours.by_tensor) == {f"net/{n}" for n in stored.values()}
    assert set(stored) <= set(theirs), (stored, theirs)
    for tensor, layer in stored.items():
        assert ours.of("net", layer) == theirs[tensor], (layer, ours.of("net", layer), theirs[tensor])
    # the range is over all the frames: the last frame alone gives other scales
    alone = calibration.activation_scales(fp32, cnn, frames[:1], name="other", method=method)
    assert all(alone.of("other", n) != ours.of("net", n) for n in stored.values() if n != "input")
    assert not list(tmp_path.glob("*augmented*"))      # its temp dir, removed


def test_a_qdq_model_s_own_scales(tmp_path):
    """quantize_static's model, imported (csdf/onnx_qdq.py), brings the scales it was
    calibrated with: those activation_scales finds for the fp32 model on the same frames."""
    fp32 = fp32_model(tmp_path / "fp32.onnx")
    frames = _frames(4)
    want = calibration.activation_scales(fp32, load_onnx(fp32, "net"), frames)
    qdq = load_onnx(ort_quantized(fp32, frames, tmp_path / "qdq.onnx"), "net")
    got = calibration.qdq_scales(qdq)
    assert got == want
    assert calibration.qdq_scales(load_onnx(fp32, "net")) is None


def test_a_qdq_model_mixing_types_or_per_channel_is_refused(tmp_path):
    cnn = load_onnx(fp32_model(tmp_path / "fp32.onnx"), "net")
    cnn.quantized = Quantized({"input": Scale((0.1,), (0,), None, "uint8"),
                               "conv1": Scale((0.1,), (3,), None, "int8")})
    with pytest.raises(InputError, match="stored as int8 and uint8"):
        calibration.qdq_scales(cnn)
    cnn.quantized = Quantized({"input": Scale((0.1,), (0,), None, "int8"),
                               "conv1": Scale((0.1, 0.2), (0, 0), 1, "int8")})
    with pytest.raises(InputError, match="layer 'conv1': per-channel"):
        calibration.qdq_scales(cnn)


def test_merged_scales_of_several_cnns(tmp_path):
    fp32 = fp32_model(tmp_path / "fp32.onnx")
    cnn = load_onnx(fp32, "net")
    a = calibration.activation_scales(fp32, cnn, _frames(2), name="a")
    b = calibration.activation_scales(fp32, cnn, _frames(3), name="b")
    both = calibration.merged([a, b])
    assert both.dtype == "uint8" and len(both.by_tensor) == 2 * len(a.by_tensor)
    assert all(both.of("a", n) == a.of("a", n) and both.of("b", n) == b.of("b", n) for n in cnn.graph.nodes)
    from dataclasses import replace
    with pytest.raises(InputError, match="stored as int8 and uint8"):
        calibration.merged([a, replace(b, dtype="int8")])


def _ort_ranges(fp32: Path, frames: list[np.ndarray], tmp: Path, member: str, options: dict) -> dict:
    """Each tensor's range as ONNX Runtime's calibrator `member` (create_calibrator, with
    `options`) finds it over `frames`."""
    from onnxruntime.quantization.calibrate import CalibrationMethod, create_calibrator

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.left = iter([{"input": f} for f in frames])

        def get_next(self):
            return next(self.left, None)

    cal = create_calibrator(fp32, augmented_model_path=str(tmp / f"aug_{member}.onnx"),
                            calibrate_method=getattr(CalibrationMethod, member), extra_options=options)
    cal.collect_data(Reader())
    return {t: d.range_value for t, d in cal.compute_data().data.items()}


@pytest.mark.parametrize("method", methods.names())
def test_scales_are_those_of_ort_s_calibrator_on_the_same_frames(tmp_path, method, capsys):
    """Every method against ONNX Runtime's calibrator run here with the method's options: each
    stored tensor's scale and zero point are compute_scale_zp of the range it finds. Frames with
    an outlier (one 6x the others' spread), on which the methods differ: the histogram ones
    clip, so their scales differ from MinMax's and none is larger. ONNX Runtime's own
    default Entropy (128 bins) is MinMax here, as deploy/quant/methods.py says. The
    calibrators' progress lines are kept off stdout."""
    from onnxruntime.quantization.quant_utils import compute_scale_zp, get_qmin_qmax_for_qType
    qmin, qmax = get_qmin_qmax_for_qType(onnx.TensorProto.UINT8)
    fp32 = fp32_model(tmp_path / "fp32.onnx")
    cnn = load_onnx(fp32, "net")
    frames = _frames(4) + [6 * _frames(1)[0]]
    chosen = methods.method(method)
    capsys.readouterr()
    ours = calibration.activation_scales(fp32, cnn, frames, method=method)
    assert capsys.readouterr().out == ""
    ranges = _ort_ranges(fp32, frames, tmp_path, chosen.ort_member, chosen.extra_options())
    for tensor, layer in calibration.stored(cnn, onnx.load(str(fp32))).items():
        zero, scale = compute_scale_zp(*ranges[tensor], qmin, qmax, symmetric=False)
        assert ours.of("net", layer) == TensorScale(float(np.squeeze(scale)), int(np.squeeze(zero))), (method, layer)
    minmax = calibration.activation_scales(fp32, cnn, frames, method="minmax")
    if method != "minmax":      # a range inside the values seen: no scale above MinMax's
        assert ours != minmax
        assert all(s.scale <= minmax.by_tensor[k].scale * (1 + 1e-6) for k, s in ours.by_tensor.items())
    if method == "entropy":
        as_floats = lambda ranges: {t: [float(np.squeeze(v)) for v in r] for t, r in ranges.items()}  # noqa: E731
        assert as_floats(_ort_ranges(fp32, frames, tmp_path, "Entropy", {})) \
            == as_floats(_ort_ranges(fp32, frames, tmp_path, "MinMax", {}))


def test_an_unknown_method_is_one_line(tmp_path):
    fp32 = fp32_model(tmp_path / "fp32.onnx")
    with pytest.raises(InputError, match="unknown calibration method 'kl'.*minmax, entropy, percentile"):
        calibration.activation_scales(fp32, load_onnx(fp32, "net"), _frames(1), method="kl")

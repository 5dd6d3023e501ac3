"""`explore deploy --calibration`: an int8 plan's scales from the user's frames (.npy, .npz),
equal to ONNX Runtime's calibration on those frames; without it, generated frames and one
warning line; `--calibration-method` picks ONNX Runtime's calibrator; the manifest keeps where
the scales came from; a file of the wrong shape, type or no frames: one line, exit 2, nothing
written; given for an fp32 plan, ignored with a warning."""
from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import write_tiny_onnx
from csdf.onnx_import import load_onnx
from deploy.quant.calibration import activation_scales
from explorer.cli.main import main
from refusals import refused


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    root = tmp_path_factory.mktemp("calib")
    write_tiny_onnx(root / "tiny.onnx")
    (root / "app.yaml").write_text("name: tiny\ncnns:\n  - name: tiny\n    model: tiny.onnx\n")
    for precision in ("int8", "fp32"):
        assert main([str(root / "app.yaml"), "--precision", precision, "--mem", "0", "--quiet",
                     "--time-limit", "5", "--out", str(root / precision)]) == 0
    return root


def test_scales_from_the_users_frames(plans, tmp_path, capsys):
    rng = np.random.default_rng(7)
    frames = (rng.random((5, 3, 8, 8)) * 4).astype(np.float32)
    np.savez(tmp_path / "frames.npz", a=frames[:2], b=frames[2:])
    capsys.readouterr()
    assert main(["deploy", str(plans / "int8" / "plan.json"), "--out", str(tmp_path / "d"),
                 "--calibration", str(tmp_path / "frames.npz")]) == 0
    assert "warning" not in capsys.readouterr().err
    stored = json.loads((tmp_path / "d" / "manifest.json").read_text())["quantization"]
    cnn = load_onnx(plans / "tiny.onnx", "tiny")
    want = activation_scales(plans / "tiny.onnx", cnn, [f[None] for f in frames])
    assert stored["tensors"] == want.to_json()["tensors"]
    assert stored["origins"] == {"tiny": {"frames": "file", "method": "minmax", "count": 5,
                                          "path": str((tmp_path / "frames.npz").resolve())}}
    # another of ONNX Runtime's calibrators on the same frames: its own scales
    assert main(["deploy", str(plans / "int8" / "plan.json"), "--out", str(tmp_path / "p"),
                 "--calibration", str(tmp_path / "frames.npz"), "--calibration-method", "percentile"]) == 0
    pct = json.loads((tmp_path / "p" / "manifest.json").read_text())["quantization"]
    want = activation_scales(plans / "tiny.onnx", cnn, [f[None] for f in frames], method="percentile")
    assert pct["tensors"] == want.to_json()["tensors"] != stored["tensors"]
    assert pct["origins"]["tiny"]["method"] == "percentile"

    assert main(["deploy", str(plans / "int8" / "plan.json"), "--out", str(tmp_path / "g")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "warning" in err[0] and "generated frames" in err[0]
    generated = json.loads((tmp_path / "g" / "manifest.json").read_text())["quantization"]
    assert generated["tensors"] != stored["tensors"]
    assert generated["origins"] == {"tiny": {"frames": "generated", "method": "minmax", "count": 16}}


@pytest.mark.parametrize("array, words", [
    (np.zeros((4, 3, 9, 8), np.float32), ("bad.npy", "[1, 3, 8, 8]")),       # another shape
    (np.zeros((4, 3, 8, 8), np.int32), ("bad.npy", "int32")),                # not float
    (np.zeros((0, 3, 8, 8), np.float32), ("bad.npy", "no frames")),          # no frames
])
def test_a_bad_calibration_file_is_one_line(plans, tmp_path, capsys, array, words):
    np.save(tmp_path / "bad.npy", array)
    refused(capsys, ["deploy", str(plans / "int8" / "plan.json"), "--out", str(tmp_path / "d"),
                     "--calibration", str(tmp_path / "bad.npy")], *words)
    assert not (tmp_path / "d").exists()


def test_calibration_for_an_fp32_plan_is_ignored_with_a_warning(plans, tmp_path, capsys):
    np.save(tmp_path / "f.npy", np.zeros((1, 3, 8, 8), np.float32))
    capsys.readouterr()
    assert main(["deploy", str(plans / "fp32" / "plan.json"), "--out", str(tmp_path / "d"),
                 "--calibration", str(tmp_path / "f.npy")]) == 0
    assert main(["deploy", str(plans / "fp32" / "plan.json"), "--out", str(tmp_path / "m"),
                 "--calibration-method", "entropy"]) == 0
    err = capsys.readouterr().err
    assert "--calibration is for int8 plans" in err and "--calibration-method is for int8 plans" in err
    assert "quantization" not in json.loads((tmp_path / "d" / "manifest.json").read_text())


def test_an_int8_plan_is_refused_for_tensorrt(plans, tmp_path, capsys):
    refused(capsys, ["deploy", str(plans / "int8" / "plan.json"), "--out", str(tmp_path / "t"),
                     "--backend", "tensorrt"], "int8 plan", "--backend onnxruntime")
    assert not (tmp_path / "t").exists()


def test_an_unknown_calibration_method_is_one_line_before_any_work(plans, tmp_path):
    import memtrade
    from sdf3.errors import InputError
    with pytest.raises(InputError, match="--calibration-method: unknown calibration method 'kl'"):
        memtrade.deploy(plans / "int8" / "plan.json", tmp_path / "k", calibration_method="kl")
    assert not (tmp_path / "k").exists()

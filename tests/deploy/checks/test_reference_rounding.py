"""The fp16 reference rounds where an fp16 deployment stores (deploy/checks/rounding.py):
the layer outputs of csdf's import, each rounded to fp16 in an fp32 computation; and at fp16
the verdict still fails a step whose weights are off by more than its tolerance, two swapped
step models and a ring read at the wrong slots."""
from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import numpy_helper

from deploy.checks import reference, rounding
from test_verdict import deploy, reverse_window_rows, run_json, swap_models
from refusals import redigest


def _r(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).astype(np.float32)


def _conv(x: np.ndarray, w: np.ndarray, stride: int = 1) -> np.ndarray:
    """3x3 convolution, pads 1, of one NCHW image, in float64 (then fp32)."""
    xp = np.pad(x[0].astype(np.float64), ((0, 0), (1, 1), (1, 1)))
    c, h, wd = x.shape[1:]
    out_h, out_w = (h - 1) // stride + 1, (wd - 1) // stride + 1
    y = np.zeros((w.shape[0], out_h, out_w))
    for i in range(out_h):
        for j in range(out_w):
            patch = xp[:, i * stride:i * stride + 3, j * stride:j * stride + 3]
            y[:, i, j] = np.tensordot(w, patch, axes=([1, 2, 3], [0, 1, 2]))
    return y[None].astype(np.float32)


def test_the_stored_tensors_are_the_fused_layer_outputs(tiny_onnx):
    """conv1 + bn1 + relu1 is one layer (r1), conv2 + relu2 another (r2): c1, n1 and c2 are
    never stored, so never rounded."""
    model = onnx.load(str(tiny_onnx))
    assert rounding.stored_tensors(tiny_onnx, model) == ["input", "r1", "r2", "p", "f", "out"]


def test_the_reference_rounds_each_stored_tensor_and_nothing_else(tiny_onnx):
    model = onnx.load(str(tiny_onnx))
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    sess = reference.session(tiny_onnx, 1, "float16")
    worst = 0.0
    for seed in range(4):
        x = np.random.default_rng(seed).standard_normal((1, 3, 8, 8), dtype=np.float32)
        got = reference.run(sess, x)[0].reshape(-1)
        assert np.array_equal(got, _r(got))           # the output is stored: fp16 values
        # the same network by hand, rounded at the fused layers' outputs only
        scale = w["g"] / np.sqrt(w["v"] + 1e-5)
        c1 = _conv(_r(x), w["w1"])
        r1 = _r(np.maximum(c1 * scale[None, :, None, None]
                           + (w["b"] - w["m"] * scale)[None, :, None, None], 0).astype(np.float32))
        r2 = _r(np.maximum(_conv(r1, w["w2"], 2) + w["b2"][None, :, None, None].astype(np.float32), 0))
        p = _r(r2.mean(axis=(2, 3)))
        want = _r((p.astype(np.float64) @ w["wf"].T + w["bf"]).astype(np.float32)).reshape(-1)
        ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float32)
        worst = max(worst, float(np.max(np.abs(got - want) / ulp)))
        unrounded = reference.run(reference.session(tiny_onnx, 1), x)[0].reshape(-1)
        assert not np.array_equal(got, unrounded)
    assert worst <= 1.0, worst        # one fp16 unit: an element rounded the other way, at most


def test_a_bias_off_by_more_than_the_tolerance_fails_at_fp16(tmp_path, capsys):
    """The last conv's bias of channel 0 moved by a few fp16 units: within the tolerance at a
    quarter of it, FAIL at twice it (the tolerance is what the verdict says it is)."""
    out = deploy(tmp_path, parts=True, data_bytes=2)
    code, res = run_json(capsys, out)
    v = res["verdict"]["net"]
    assert code == 0 and v["verdict"] == "PASS" and v["reference_dtype"] == "float16"
    tol = v["tolerance"]
    ulp = float(np.spacing(np.float16(v["max_abs_output"])))
    assert 4 * ulp <= tol < 0.05 * v["max_abs_output"], (tol, ulp)    # a few units, not 5 %
    manifest = json.loads((out / "manifest.json").read_text())
    rel = next(r for r, m in manifest["models"].items() if m["layer"] == "d")
    original = (out / rel).read_bytes()
    for shift, verdict in ((0.25 * tol, "PASS"), (2 * tol, "FAIL")):
        model = onnx.load_from_string(original)
        for i, t in enumerate(model.graph.initializer):
            b = numpy_helper.to_array(t)
            if b.ndim == 1 and b.size == 4 and b.dtype == np.float32:
                b = b.copy()
                b[0] += shift
                model.graph.initializer[i].CopyFrom(numpy_helper.from_array(b, t.name))
                break
        else:
            raise AssertionError(f"no bias in {rel}")
        onnx.save(model, str(out / rel))
        redigest(out)
        code, res = run_json(capsys, out)
        assert res["verdict"]["net"]["verdict"] == verdict, (shift, res["verdict"]["net"])
        assert code == (0 if verdict == "PASS" else 4)


def test_swapped_steps_fail_at_fp16(tmp_path, capsys):
    out = deploy(tmp_path, parts=True, data_bytes=2)
    swap_models(out, "b", "c")
    code, res = run_json(capsys, out)
    assert code == 4 and res["verdict"]["net"]["verdict"] == "FAIL"


def test_a_ring_read_at_the_wrong_slots_fails_at_fp16(tmp_path, capsys):
    """One interior part of layer c gathers its window's rows in the wrong order (slot
    indices still inside the ring, so the manifest check lets it run)."""
    out = deploy(tmp_path, parts=True, data_bytes=2)
    reverse_window_rows(out, "c")
    code, res = run_json(capsys, out)
    assert code == 4 and res["verdict"]["net"]["verdict"] == "FAIL"

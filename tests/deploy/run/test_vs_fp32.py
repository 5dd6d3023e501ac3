"""A reduced-precision deployment's deviation from the fp32 model (deploy/run/vs_fp32.py): the
figures `memtrade.run` and `explore run --json` report equal SQNR, cosine and argmax agreement
computed here with numpy from the run's own outputs and a plain ONNX Runtime session on the
source model; an int8 deployment whose source is gone or changed reports why it cannot
compare; the run names what its verdict judged against and where its scales came from."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import onnxruntime as ort
import pytest

import memtrade
from conftest import write_tiny_onnx
from csdf.onnx_import import load_onnx
from deploy.build.derive import derive
from deploy.build.quantization import deployment_scales
from deploy.run.vs_fp32 import Accumulator, OutputDeviation, VsFp32
from deploy_fixtures import make_plan
from explorer.cli.main import main

FRAMES = 5


def _numpy_figures(got: np.ndarray, want: np.ndarray) -> tuple[float, float, float | None]:
    """SQNR dB, cosine and argmax agreement (axis 1) of stacked outputs [F, N, C, H, W]."""
    y, x = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    sqnr = 10 * np.log10(np.dot(x, x) / np.dot(y - x, y - x))
    cosine = np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y))
    agree = None if got.shape[2] == 1 else float(np.mean(got.argmax(axis=2) == want.argmax(axis=2)))
    return float(sqnr), float(cosine), agree


@pytest.mark.parametrize("shape, noise", [((1, 10, 1, 1), 0.05), ((1, 4, 3, 5), 0.5),
                                          ((2, 3, 2, 2), 2.0), ((1, 1, 6, 6), 0.1)])
def test_accumulated_figures_equal_numpy_over_all_frames(shape, noise):
    rng = np.random.default_rng(len(shape) + int(noise * 100))
    want = rng.standard_normal((4,) + shape).astype(np.float32)
    got = (want + noise * rng.standard_normal(want.shape)).astype(np.float32)
    acc = Accumulator(["y"])
    for g, w in zip(got, want):
        acc.add([g], [w.reshape(-1)])            # the fp32 model's shape is reshaped to ours
    (dev,) = acc.result()
    sqnr, cosine, agree = _numpy_figures(got, want)
    assert dev.sqnr_db == pytest.approx(sqnr, rel=1e-9)
    assert dev.cosine == pytest.approx(cosine, rel=1e-9)
    assert dev.max_abs_diff == pytest.approx(float(np.abs(got - want).max()), rel=1e-6)
    assert (dev.argmax_agreement is None) == (agree is None)
    if agree is not None:
        assert dev.argmax_agreement == pytest.approx(agree)
        assert 0 < agree < 1 or noise < 0.1


def test_identical_and_all_zero_outputs():
    acc = Accumulator(["same", "zeros"])
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    acc.add([x, np.ones_like(x)], [x, np.zeros_like(x)])
    same, zeros = acc.result()
    assert same.sqnr_db == math.inf and same.cosine == 1.0 and same.argmax_agreement == 1.0
    assert zeros.sqnr_db == -math.inf and zeros.cosine == 0.0 and zeros.max_abs_diff == 1.0
    for dev in (same, zeros):      # JSON holds no infinity: null, told apart by max |diff|
        assert dev.to_dict()["sqnr_db"] is None
        assert OutputDeviation.from_dict(json.loads(json.dumps(dev.to_dict()))) == dev


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """The tiny CNN (tests/conftest.py) deployed at fp16, int8 and fp32 from one source file."""
    folder = tmp_path_factory.mktemp("vs_fp32")
    source = write_tiny_onnx(folder / "tiny.onnx")
    cnn = load_onnx(source, "tiny")
    out = {}
    for name, data_bytes in (("fp16", 2), ("int8", 1), ("fp32", 4)):
        scales = deployment_scales({"tiny": cnn}, None) if data_bytes == 1 else None
        out[name] = folder / name
        derive(make_plan([cnn], {"tiny": {k: 1 for k in cnn.order()}}, data_bytes=data_bytes),
               {"tiny": cnn}, out[name], scales=scales)
    frames = np.random.default_rng(7).uniform(-1, 3, (FRAMES, 1, 3, 8, 8)).astype(np.float32)
    return source, out, frames


@pytest.mark.parametrize("precision", ["fp16", "int8"])
def test_run_s_figures_equal_numpy_on_its_outputs_against_plain_fp32(deployed, precision):
    source, out, frames = deployed
    res = memtrade.run(out[precision], inputs=frames, threads=1)
    sess = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    want = np.stack([sess.run(None, {"input": f})[0] for f in frames])        # [F, 1, 10]
    got = np.stack([outs[0] for outs in res.outputs["tiny"]])
    dev = res.vs_fp32["tiny"]
    assert dev.available and dev.frames == FRAMES and len(dev.outputs) == 1
    (o,) = dev.outputs
    sqnr, cosine, agree = _numpy_figures(got.reshape(FRAMES, 1, 10, 1, 1),
                                         want.reshape(FRAMES, 1, 10, 1, 1))
    assert o.output == "out"
    assert o.sqnr_db == pytest.approx(sqnr, rel=1e-6) and o.cosine == pytest.approx(cosine, rel=1e-9)
    assert o.argmax_agreement == pytest.approx(agree)
    assert o.max_abs_diff == pytest.approx(float(np.abs(got - want).max()), rel=1e-5)
    assert 0 < o.max_abs_diff and math.isfinite(o.sqnr_db)
    # the record as run.json holds it is the typed one
    assert res.to_dict()["vs_fp32"]["tiny"] == dev.to_dict()
    assert VsFp32.from_dict(json.loads(json.dumps(dev.to_dict()))) == dev
    if precision == "int8":    # compared with the source, not with the int8 reference
        assert dev.model == str(source.resolve())
        assert "int8 reference" in res.references["tiny"]
        assert res.calibration["tiny"].generated and res.calibration["tiny"].method == "minmax"
    else:
        assert dev.model == "reference/tiny.onnx" and "rounded to fp16" in res.references["tiny"]
        assert res.calibration == {}


def test_an_fp32_deployment_has_no_vs_fp32(deployed):
    res = memtrade.run(deployed[1]["fp32"], inputs=deployed[2][:1], threads=1)
    assert res.vs_fp32 == {} and "vs_fp32" not in res.to_dict()
    assert res.references["tiny"] == "the unmodified model (reference/tiny.onnx)"


def test_an_int8_source_gone_or_changed_is_unavailable_with_the_reason(deployed, tmp_path, capsys):
    source, out, frames = deployed
    dep = tmp_path / "int8"
    shutil.copytree(out["int8"], dep)
    manifest = json.loads((dep / "manifest.json").read_text())
    moved = tmp_path / "elsewhere.onnx"
    manifest["cnns"]["tiny"]["source"]["path"] = str(moved)
    (dep / "manifest.json").write_text(json.dumps(manifest))
    res = memtrade.run(dep, inputs=frames[:1], threads=1)
    gone = res.vs_fp32["tiny"]
    assert not gone.available and str(moved) in gone.reason and "not found" in gone.reason
    assert res.verdicts["tiny"].verdict == "PASS"          # the verdict does not depend on it
    write_tiny_onnx(moved, seed=1)                         # another network at that path
    capsys.readouterr()
    assert main(["run", str(dep), "--frames", "2", "--in-process"]) == 0
    lines = capsys.readouterr().out.splitlines()
    line = next(x for x in lines if "vs fp32" in x)
    assert "unavailable" in line and str(moved) in line and "SHA-256" in line
    assert any("int8 scales from minmax calibration on 16 generated standard-normal frames" in x
               for x in lines)
    assert any("judged against the int8 reference" in x for x in lines)


def test_explore_run_json_carries_vs_fp32(deployed, capsys):
    capsys.readouterr()
    assert main(["run", str(deployed[1]["fp16"]), "--frames", "3", "--json", "--in-process"]) == 0
    got = json.loads(capsys.readouterr().out)
    dev = got["vs_fp32"]["tiny"]
    assert dev["available"] and dev["frames"] == 3 and dev["outputs"][0]["output"] == "out"
    assert got["verdict"]["tiny"]["reference"] == got["references"]["tiny"]


def test_a_session_s_vs_fp32_equals_the_run_s(deployed):
    """memtrade.Session.vs_fp32 on the same frames gives the record memtrade.run reports."""
    _, out, frames = deployed
    res = memtrade.run(out["int8"], inputs=frames, threads=1)
    with memtrade.Session(out["int8"]) as sess:
        got = sess.vs_fp32(frames)
    assert got.model == res.vs_fp32["tiny"].model and got.frames == FRAMES
    for a, b in zip(got.outputs, res.vs_fp32["tiny"].outputs):
        assert a.output == b.output and a.argmax_agreement == b.argmax_agreement
        assert a.sqnr_db == pytest.approx(b.sqnr_db, rel=1e-9) and a.cosine == pytest.approx(b.cosine)


@pytest.mark.parametrize("source, words", [
    (None, "records no source model"),
    ("qdq", "already quantized (QDQ)"),
    ("float16", "stored in fp16"),
])
def test_an_int8_source_without_an_fp32_form_is_unavailable(deployed, source, words):
    from dataclasses import replace

    from deploy.run.vs_fp32 import fp32_model
    from deploy.runtime import manifest as mf
    manifest = mf.load(deployed[1]["int8"])
    info = manifest.cnns["tiny"]
    changed = None if source is None else replace(info.source, kind=source)
    manifest = replace(manifest, cnns={"tiny": replace(info, source=changed)})
    path, reason = fp32_model(deployed[1]["int8"], manifest, "tiny")
    assert path is None and words in reason and "\n" not in reason

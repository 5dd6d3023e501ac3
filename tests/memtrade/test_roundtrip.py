"""explore -> deploy -> Session.run through the public API, on frames the tests make, compared
element by element with a plain ONNX Runtime session of the model the deployment keeps as its
reference (the original model; for an int8 plan the network quantized with the deployment's
own scales), within the tolerance `explore run`'s verdict allows (deploy/run/verdict.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

import memtrade
from deploy.quant.scales import key
from deploy.run import verdict
from deploy_fixtures import tiny_onnx

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(effort="full", population=6, generations=2, relink_rounds=0, local_rounds=0,
             workers=1, seed=3)


def frames(shape, count: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape, dtype=np.float32) for _ in range(count)]


def plain(sess: memtrade.Session, cnn: str, frame: np.ndarray) -> list[np.ndarray]:
    """The unmodified model's outputs: a plain InferenceSession on the reference file."""
    ref = sess.manifest.cnns[cnn].reference
    model = ort.InferenceSession(str(sess.path / ref), providers=["CPUExecutionProvider"])
    return model.run(None, {model.get_inputs()[0].name: frame})


def assert_close(got: list[np.ndarray], want: list[np.ndarray], tol) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        limit = tol(float(np.max(np.abs(w))))
        assert float(np.max(np.abs(g - w))) <= limit


def fp32_tolerance(size: float) -> float:
    return verdict.tolerance("float32", None, size, 0.0)


@pytest.fixture(scope="module")
def readme_deployment(tmp_path_factory):
    """The README's app (MobileNetV2, fp16, at most 8 MB) searched briefly and deployed."""
    out = tmp_path_factory.mktemp("readme")
    found = memtrade.explore(memtrade.load_app(ROOT / "apps/table13_mobilenet_sequential.yaml"),
                             mem="8MB", fps=0, **SMALL)
    assert found.plan.memory_bytes <= 8 * 2**20 and found.met
    return memtrade.deploy(found, out / "dep"), found


def test_the_readme_app_at_fp16_computes_the_model_within_the_verdicts_tolerance(readme_deployment):
    dep, found = readme_deployment
    with memtrade.Session(dep.path, threads=1) as sess:
        cnn = "mobilenet_v2"
        ref = sess.path / sess.manifest.cnns[cnn].reference
        from deploy.checks import reference
        exact = reference.session(ref, 1, weights="float16")
        half = reference.session(ref, 1, "float16", "float16")
        for frame in frames((1, 3, 224, 224), 2):
            spread = verdict.spread(exact, half, [frame])
            want = plain(sess, cnn, frame)
            got = sess.run(frame)
            assert_close(got, want, lambda size: verdict.tolerance("float16", None, size, spread)
                         + spread)


def test_app1_at_int8_with_a_calibration_file(tmp_path):
    calibration = tmp_path / "calibration.npy"
    np.save(calibration, np.stack(frames((1, 3, 224, 224), 4, seed=7)))
    app = memtrade.load_app(ROOT / "apps/table12_app1_mobilenet_v2.yaml", precision="int8")
    found = memtrade.explore(app, **SMALL)
    dep = memtrade.deploy(found, tmp_path / "dep", calibration=calibration)
    with memtrade.Session(dep.path, threads=1) as sess:
        quant, cnn = sess.manifest.quantization, "mobilenet_v2"
        step = verdict.int8_step(quant, [key(cnn, o.layer) for o in sess.manifest.cnns[cnn].outputs])
        for frame in frames((1, 3, 224, 224), 2, seed=1):
            got, want = sess.run(frame), plain(sess, cnn, frame)
            assert_close(got, want, lambda size: verdict.tolerance("int8", None, size, 0.0, step))


def two_cnn_app(folder: Path, pipelined: bool = False) -> dict:
    tiny_onnx(folder / "a.onnx", seed=1)
    tiny_onnx(folder / "b.onnx", seed=2, shape=(1, 3, 12, 16), classes=6)
    doc = {"name": "two", "platform": "jetson-tx2", "precision": "fp32",
           "cnns": [{"name": "a", "model": "a.onnx"}, {"name": "b", "model": "b.onnx"}]}
    if pipelined:
        doc["cnns"] = [{"name": "a", "model": "a.onnx", "partitions": [
            {"name": "head", "layers": ["conv1", "se_mul"]},
            {"name": "tail", "layers": ["pool4", "softmax"]}]}]
        doc["pipelines"] = [["a.head", "a.tail"]]
    return doc


def test_a_two_cnn_app_given_as_a_mapping_runs_both_by_name(tmp_path):
    doc = two_cnn_app(tmp_path)
    found = memtrade.explore(memtrade.load_app(doc, base_dir=tmp_path), mem=0, **SMALL)
    written = found.write(tmp_path / "out")
    assert (tmp_path / "out" / "app.yaml") in written
    # the plan written names the app written beside it, so the files alone deploy
    dep = memtrade.deploy(tmp_path / "out" / "plan.json", tmp_path / "dep")
    feed = {"a": frames((1, 3, 16, 12), 1)[0], "b": frames((1, 3, 12, 16), 1, seed=4)[0]}
    with memtrade.Session(dep.path) as sess:
        got = sess.run(feed)
        assert set(got) == {"a", "b"}
        for cnn in ("a", "b"):
            assert_close(got[cnn], plain(sess, cnn, feed[cnn]), fp32_tolerance)
        with pytest.raises(memtrade.InputError, match="CNN 'b' has no frame"):
            sess.run({"a": feed["a"]})
        with pytest.raises(memtrade.InputError, match="mapping of CNN name"):
            sess.run(feed["a"])


def test_a_pipelined_app_streams_frames_through_its_stages(tmp_path):
    doc = two_cnn_app(tmp_path, pipelined=True)
    found = memtrade.explore(memtrade.load_app(doc, base_dir=tmp_path), mem=0, **SMALL)
    dep = memtrade.deploy(found, tmp_path / "dep")
    shots = frames((1, 3, 16, 12), 11, seed=5)          # more than one CHUNK of frames
    with memtrade.Session(dep.path) as sess:
        assert sess._executor.cnns["a"].pipelined
        outs = list(sess.stream(shots))
        assert len(outs) == len(shots)
        for frame, got in zip(shots, outs):
            assert_close(got, plain(sess, "a", frame), fp32_tolerance)


def test_a_qdq_model_deploys_with_its_own_scales(tmp_path):
    pytest.importorskip("onnxruntime.quantization")
    from test_onnx_qdq import SHAPE, qdq_models
    _, qdq = qdq_models(tmp_path)
    app = memtrade.load_app({"name": "qdq", "cnns": [{"name": "net", "model": str(qdq)}]})
    assert app.precision.name == "int8"
    dep = memtrade.deploy(memtrade.explore(app, **SMALL), tmp_path / "dep")
    with memtrade.Session(dep.path) as sess:
        step = verdict.int8_step(sess.manifest.quantization,
                                 [key("net", o.layer) for o in sess.manifest.cnns["net"].outputs])
        for frame in frames(SHAPE, 3, seed=2):
            assert_close(sess.run(frame), plain(sess, "net", frame),
                         lambda size: verdict.tolerance("int8", None, size, 0.0, step))

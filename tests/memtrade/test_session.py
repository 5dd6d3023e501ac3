"""memtrade.Session on a small deployment: outputs in the model's shapes and types, equal to
what `explore run` computes on the same frames; every kind of bad feed refused in one line
naming the input and what it expected; the context manager and calls from several threads."""
from __future__ import annotations

import threading

import numpy as np
import onnxruntime as ort
import pytest

import memtrade
from deploy_fixtures import tiny_onnx

SHAPE = (1, 3, 16, 12)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    folder = tmp_path_factory.mktemp("session")
    tiny_onnx(folder / "tiny.onnx")
    app = memtrade.load_app({"name": "tiny", "precision": "fp32",
                             "cnns": [{"name": "tiny", "model": "tiny.onnx"}]}, base_dir=folder)
    found = memtrade.explore(app, mem=0, effort="full", population=6, generations=2,
                             relink_rounds=0, local_rounds=0, workers=1)
    return memtrade.deploy(found, folder / "dep"), folder / "tiny.onnx"


def shots(count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, *SHAPE), dtype=np.float32)


def test_outputs_are_the_models_names_shapes_and_values(deployment):
    dep, model = deployment
    plain = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    with memtrade.Session(dep.path) as sess:
        (inp,), outs = sess.get_inputs(), sess.get_outputs()
        assert (inp.name, inp.shape) == (plain.get_inputs()[0].name, SHAPE)
        assert [(o.name, o.shape) for o in outs] == [(o.name, tuple(o.shape)) for o in plain.get_outputs()]
        for frame in shots(3):
            got, want = sess.run(frame), plain.run(None, {inp.name: frame})
            assert [g.shape for g in got] == [w.shape for w in want]
            assert all(g.dtype == w.dtype for g, w in zip(got, want))
            assert max(float(np.max(np.abs(g - w))) for g, w in zip(got, want)) <= 2e-4 * max(
                float(np.max(np.abs(w))) for w in want)


BAD = {
    "float64": (lambda f: f.astype(np.float64), "expected dtype float32, got float64"),
    "int": (lambda f: f.astype(np.int32), "expected dtype float32, got int32"),
    "rank 3": (lambda f: f[0], "expected rank 4"),
    "rank 5": (lambda f: f[None], "expected rank 4"),
    "shape": (lambda f: np.zeros((1, 3, 12, 16), np.float32), "expected shape [1, 3, 16, 12], got [1, 3, 12, 16]"),
    "batch": (lambda f: np.zeros((2, 3, 16, 12), np.float32), "expected shape [1, 3, 16, 12], got [2, 3, 16, 12]"),
    "list": (lambda f: f.tolist(), "expected a numpy array"),
    "unknown name": (lambda f: {"other": f}, "no CNN named 'other'; expected tiny"),
    "none": (lambda f: {}, "CNN 'tiny' has no frame"),
}


@pytest.mark.parametrize("case", BAD)
def test_a_bad_feed_is_one_line_naming_what_was_expected(deployment, case):
    dep, _ = deployment
    make, words = BAD[case]
    with memtrade.Session(dep.path) as sess:
        with pytest.raises(memtrade.InputError) as err:
            sess.run(make(shots(1)[0]))
        assert words in str(err.value) and "\n" not in str(err.value)
        if case not in ("unknown name", "none"):
            assert "input 'x' of CNN 'tiny'" in str(err.value)


def test_a_closed_session_refuses_and_threads_take_turns(deployment):
    dep, _ = deployment
    frames = shots(8, seed=3)
    sess = memtrade.Session(dep.path)
    alone = [sess.run(f)[0] for f in frames]
    got: dict[int, np.ndarray] = {}

    def worker(k: int) -> None:
        for i in range(k, len(frames), 4):
            got[i] = sess.run(frames[i])[0]
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(got[i], alone[i]) for i in range(len(frames)))
    sess.close()
    with pytest.raises(memtrade.InputError, match="closed"):
        sess.run(frames[0])


def test_run_with_inputs_returns_what_the_session_returns(deployment):
    """Bit for bit with the same kernels (a forced layout: the default times two kernel
    layouts per step and keeps the faster, which can round otherwise)."""
    dep, _ = deployment
    frames = shots(5, seed=9)
    result = memtrade.run(dep.path, inputs=frames, threads=1, layout="nchw")
    assert result.passed and result.frames == 5 and result.output_names["tiny"] == ("y",)
    with memtrade.Session(dep.path, layout="nchw") as sess:
        for frame, outs in zip(frames, result.outputs["tiny"]):
            assert all(np.array_equal(a, b) for a, b in zip(outs, sess.run(frame)))

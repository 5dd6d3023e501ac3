"""`explore run DIR --input FRAMES --output OUT.npz`: the user's frames run, their outputs
written as memtrade.Session.run returns them, the verdict judged on them; bad input files
refused in one line with exit status 2, an existing output kept without --force."""
from __future__ import annotations

import json

import numpy as np
import pytest

import memtrade
from deploy_fixtures import tiny_onnx
from explorer.cli.main import main

SHAPE = (1, 3, 16, 12)
RUN = ["--threads", "1", "--in-process", "--layout", "nchw"]


@pytest.fixture(scope="module")
def dep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runinput")
    tiny_onnx(folder / "tiny.onnx")
    app = memtrade.load_app({"name": "tiny", "cnns": [{"name": "tiny", "model": "tiny.onnx"}]},
                            base_dir=folder)
    return memtrade.deploy(memtrade.explore(app, mem="1GB"), folder / "dep").path


@pytest.mark.parametrize("frames", [3, None])
def test_outputs_are_what_the_session_returns(dep, tmp_path, capsys, frames):
    rng = np.random.default_rng(4)
    data = rng.standard_normal(((frames,) if frames else ()) + SHAPE, dtype=np.float32)
    np.save(tmp_path / "in.npy", data)
    out = tmp_path / "out.npz"
    assert main(["run", str(dep), "--input", str(tmp_path / "in.npy"), "--output", str(out), *RUN]) == 0
    assert "PASS" in capsys.readouterr().out
    saved = np.load(out)
    stack = data if frames else data[None]
    assert list(saved) == ["y"] and saved["y"].shape == (len(stack), 1, 10)
    with memtrade.Session(dep, layout="nchw") as sess:
        for f, frame in enumerate(stack):
            assert np.array_equal(saved["y"][f], sess.run(frame)[0])
    run = json.loads((dep / "run.json").read_text())
    assert run["frames"] == len(stack) and run["settings"]["input"] == str(tmp_path / "in.npy")


def _write(tmp_path, name, value):
    path = tmp_path / name
    if isinstance(value, bytes):
        path.write_bytes(value)
    elif name.endswith(".npz"):
        np.savez(path, **value)
    else:
        np.save(path, value)
    return str(path)


REFUSED = {
    "wrong shape": ("in.npy", np.zeros((2, 1, 3, 12, 16), np.float32), [],
                    "input 'x' of CNN 'tiny': expected shape [1, 3, 16, 12], got [1, 3, 12, 16]"),
    "float64": ("in.npy", np.zeros((2, *SHAPE)), [], "expected dtype float32, got float64"),
    "rank 3": ("in.npy", np.zeros((3, 16, 12), np.float32), [], "expected [F, N, C, H, W] or [N, C, H, W]"),
    "not numpy": ("in.npy", b"not a numpy file", [], "not a .npy or .npz of numbers"),
    "other cnn": ("in.npz", {"other": np.zeros((1, *SHAPE), np.float32)}, [], "no CNN named 'other'"),
    "output needs input": (None, None, ["--output", "OUT"], "--output: needs --input"),
    "output not npz": ("in.npy", np.zeros(SHAPE, np.float32), ["--output", "OUT.txt"], "expected a .npz"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_bad_frames_are_one_line_and_exit_2(dep, tmp_path, capsys, case):
    name, value, extra, words = REFUSED[case]
    argv = ["run", str(dep), *RUN] + [a.replace("OUT", str(tmp_path / "o")) for a in extra]
    if name:
        argv += ["--input", _write(tmp_path, name, value)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("explore: error: ") and "\n" not in err and words in err, err
    assert not (tmp_path / "o.npz").exists()


def test_an_existing_output_is_kept_without_force(dep, tmp_path, capsys):
    frames = _write(tmp_path, "in.npy", np.zeros((1, *SHAPE), np.float32))
    out = tmp_path / "out.npz"
    out.write_bytes(b"mine")
    assert main(["run", str(dep), "--input", frames, "--output", str(out), *RUN]) == 2
    assert out.read_bytes() == b"mine" and "--force" in capsys.readouterr().err
    assert main(["run", str(dep), "--input", frames, "--output", str(out), "--force", *RUN]) == 0
    assert list(np.load(out)) == ["y"]

"""Input files that are not what a command reads (explorer/app/input_file.py): a FIFO, a
folder, a missing path, an ONNX model or other binary bytes, text that is not JSON, given as
each command's input file, are refused in one line before anything blocks on them; a FIFO
is never opened (a test that opened one would hang, so an alarm fails it instead)."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from refusals import refused

KINDS = {
    "fifo": (lambda p: os.mkfifo(p), ("a FIFO (named pipe)",)),
    "folder": (lambda p: p.mkdir(), ("a directory",)),
    "missing": (lambda p: None, ("not found", "missing")),
    "onnx": (lambda p: p.write_bytes(__import__("conftest").write_tiny_onnx(
        p.with_suffix(".onnx")).read_bytes()), ()),
    "binary": (lambda p: p.write_bytes(b"\x00\xff\xfe" * 40), ("not UTF-8 text",)),
    "not json": (lambda p: p.write_text("{points: [}"), ()),
}
COMMANDS = {
    "explore": lambda f, out: [str(f), "--out", str(out)],
    "info": lambda f, out: ["info", str(f)],
    "deploy": lambda f, out: ["deploy", str(f), "--out", str(out)],
    "deploy --point": lambda f, out: ["deploy", str(f), "--point", "0", "--out", str(out)],
}


@pytest.fixture
def alarm():
    """Fail, rather than hang, a command that blocks on its input."""
    def ring(signum, frame):
        raise AssertionError("the command blocked on its input")
    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_input_that_is_not_a_readable_file_is_one_line(tmp_path, capsys, alarm, kind, command):
    make, words = KINDS[kind]
    name = "pareto.json" if command == "deploy --point" else "input.json"
    path = tmp_path / name
    make(path)
    err = refused(capsys, COMMANDS[command](path, tmp_path / "out"), str(path))
    assert not words or any(w in err for w in words), err
    assert not (tmp_path / "out").exists()


def test_a_binary_plan_names_what_it_is(tmp_path, capsys):
    from conftest import write_tiny_onnx
    path = tmp_path / "plan.json"         # ONNX bytes (onnx.save would write .json as JSON)
    path.write_bytes(write_tiny_onnx(tmp_path / "model.onnx").read_bytes())
    refused(capsys, ["deploy", str(path), "--out", str(tmp_path / "o")], "this is an ONNX model")


def test_not_regular_says_what_the_path_is(tmp_path):
    from explorer.app.input_file import not_regular
    os.mkfifo(tmp_path / "f")
    (tmp_path / "r").write_text("x")
    assert [not_regular(tmp_path / n) for n in ("f", "r", "absent")] == \
        ["a FIFO (named pipe)", None, None]
    assert not_regular(tmp_path) == "a directory"
    assert not_regular(Path("/dev/null")) == "a character device"


@pytest.mark.parametrize("named", ["model", "evaluator", "input"])
def test_a_fifo_named_inside_a_command_is_one_line(tmp_path, capsys, alarm, named):
    from conftest import write_tiny_onnx
    os.mkfifo(tmp_path / "pipe")
    model = "pipe" if named == "model" else str(write_tiny_onnx(tmp_path / "tiny.onnx"))
    (tmp_path / "app.yaml").write_text(f"name: t\ncnns:\n  - {{name: tiny, model: {model}}}\n")
    if named == "input":
        from explorer.cli.frames_file import read_frames
        from sdf3.errors import InputError
        with pytest.raises(InputError, match="a FIFO"):
            read_frames(tmp_path / "pipe")
        return
    argv = [str(tmp_path / "app.yaml"), "--out", str(tmp_path / "o")]
    refused(capsys, argv + (["--evaluator", str(tmp_path / "pipe")] if named == "evaluator" else []),
            "FIFO")

"""`explore run` on a terminal says what it is doing as it goes (loading, each CNN's frames,
the check), on stderr; off a terminal it prints none of it, so a refusal stays one line."""
from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from refusals import tiny_least_memory


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    return tiny_least_memory(tmp_path_factory.mktemp("progress"))


def _run(dep, terminal: bool) -> tuple[int, str]:
    argv = [sys.executable, "-m", "explorer.cli.main", "run", str(dep), "--frames", "2"]
    if not terminal:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        return done.returncode, done.stderr
    main, side = pty.openpty()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=side)
    os.close(side)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:            # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    return proc.wait(timeout=300), b"".join(chunks).decode()


def test_progress_on_a_terminal_only(deployed):
    code, err = _run(deployed, terminal=True)
    lines = [line.strip() for line in err.splitlines()
             if line.strip() and "still working" not in line]     # a slow machine's heartbeat
    models = len(list((deployed / "models").rglob("*.onnx")))
    assert code == 0
    assert lines == [f"explore run: loading {models} step models",
                     "explore run: running tiny: 3 warm-up and 2 timed frames",
                     "explore run: comparing the outputs with the reference's"]
    code, err = _run(deployed, terminal=False)
    assert code == 0 and err == ""

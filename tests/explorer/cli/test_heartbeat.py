"""A command on a terminal is never silent for long (explorer/cli/heartbeat.py): a line after
each stretch of silence, none while the command prints, none off a terminal."""
from __future__ import annotations

import io
import threading
import time

from explorer.cli.heartbeat import Heartbeat, Watched, heartbeat


def test_a_line_per_stretch_of_silence():
    out = io.StringIO()
    beat = Heartbeat("explore deploy", out, silence_s=0.3)
    thread = threading.Thread(target=beat.watch, daemon=True)
    thread.start()
    time.sleep(1.15)                        # silent: a line at ~0.5 s and ~1.0 s
    silent = out.getvalue().splitlines()
    printed = Watched(io.StringIO(), beat)
    for _ in range(8):                      # printing every 0.1 s: no heartbeat
        printed.write("x\n")
        time.sleep(0.1)
    beat.stop()
    thread.join()
    assert 2 <= len(silent) <= 3
    assert all(line.startswith("explore deploy: still working (") and line.endswith(" s)")
               for line in silent)
    assert out.getvalue().splitlines() == silent


def test_nothing_off_a_terminal(capsys):
    import sys
    with heartbeat("explore"):
        assert not isinstance(sys.stderr, Watched)     # pytest's capture is no terminal
    assert capsys.readouterr().err == ""

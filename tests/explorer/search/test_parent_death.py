"""`explore` killed outright (SIGKILL) during the search: its forked evaluation workers
(explorer/search/parallel.py) end with it, at once and silently (sdf3/parent_death.py), so
nothing is printed once the parent is gone and no worker is left running."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil
import pytest

from test_signals import ROOT, _env, chain


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_workers_end_with_a_killed_parent_and_print_nothing(tmp_path):
    chain(tmp_path / "chain.onnx", layers=8, side=8)
    (tmp_path / "app.yaml").write_text(
        "name: chain\ncnns:\n  - {name: chain, model: chain.onnx}\n"
        "search: {population: 40, generations: 100000, workers: 2, effort: full, time_limit: 60}\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "explorer.cli.main", str(tmp_path / "app.yaml"),
                             "--mem", "0", "--quiet", "--out", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(tmp), cwd=str(ROOT))
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 60
    while len(parent.children()) < 2:          # the pool's workers, forked for the search
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the search never started its workers"
        time.sleep(0.05)
    workers = parent.children()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, [p.pid for p in alive]
    out, err = proc.communicate(timeout=10)    # EOF only once every holder of the pipes ended
    assert err == "" and out == "", (out, err)


def test_a_child_whose_parent_is_already_gone_exits():
    code = ("import os, sys; from sdf3.parent_death import die_with_parent; "
            "die_with_parent(os.getppid() + 1 if os.getppid() != 1 else 2); print('ran on')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=str(ROOT), timeout=60)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_child_with_its_parent_alive_runs_on_armed():
    code = ("import os; from sdf3.parent_death import die_with_parent; "
            "print(die_with_parent(os.getppid()))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=str(ROOT), timeout=60)
    assert done.stdout.strip() == "True" and done.stderr == ""

"""A stopped command (explorer/cli/signals.py, explorer/report/outputs.py): `explore`,
`explore deploy` and `explore profile` stopped mid-way by SIGTERM end with one line, exit
143, no traceback and nothing beside or in --out; stopped by SIGKILL they leave their claim
and temporary sibling, and the next command into the same --out takes the claim over (one
line saying so), removes the stale sibling and succeeds, without --force."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deploy.runtime.child import child_env
from explorer.cli.main import main
from explorer.report.outputs import CLAIM
from onnx_cases import Net

ROOT = Path(__file__).resolve().parents[3]


def chain(path: Path, layers: int = 24, side: int = 24) -> Path:
    """`layers` 3x3 convs of 16 channels on side x side (24 x 24: slow enough to stop mid-way)."""
    n = Net(11)
    x = n.op("Relu", [n.conv("input", 3, 16)])
    for _ in range(layers - 1):
        x = n.op("Relu", [n.conv(x, 16, 16)])
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, side, side])], [("output", [1, 16, side, side])])


@pytest.fixture(scope="module")
def app(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("signals")
    chain(root / "chain.onnx")
    (root / "app.yaml").write_text(
        "name: chain\ncnns:\n  - {name: chain, model: chain.onnx}\n"
        "search: {population: 40, generations: 400, workers: 2, effort: full}\n")
    # what the run after a SIGKILL'd `explore profile` measures: the stale sibling it
    # removes is the --out file's, whatever the app, and 2 layers on 1 x 1 (whole only, no
    # ladder rung) profile in seconds where the 24-layer chain takes a minute
    chain(root / "small.onnx", layers=2, side=1)
    (root / "small.yaml").write_text("name: small\ncnns:\n  - {name: small, model: small.onnx}\n")
    return root / "app.yaml"


@pytest.fixture(scope="module")
def plan(app) -> Path:
    out = app.parent / "least"
    # 0 B: the least memory (exit 3 where a budget of 0 counts as missed, 0 where it is a goal)
    assert main([str(app), "--mem", "0", "--quiet", "--generations", "3", "--population", "8",
                 "--out", str(out)]) in (0, 3)
    return out / "plan.json"


def _leftovers(out: Path) -> list[str]:
    """Temporary siblings of `out` (`.NAME.*`) and a claim inside it."""
    found = [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.stem}.")]
    return found + ([CLAIM] if (out / CLAIM).exists() else [])


def _env(tmp: Path) -> dict[str, str]:
    env = child_env()
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["TMPDIR"] = str(tmp)
    return env


def _started(argv: list[str], tmp: Path, ready) -> subprocess.Popen:
    """`explore argv` in a process of its own (temporary files in `tmp`), once `ready()`
    holds (polled)."""
    proc = subprocess.Popen([sys.executable, "-m", "explorer.cli.main", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(tmp), cwd=str(tmp.parent))
    deadline = time.monotonic() + 120
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the command never got under way"
        time.sleep(0.02)
    time.sleep(0.3)
    assert proc.poll() is None, ("finished before it could be stopped", proc.communicate())
    return proc


def _tmp_sibling(out: Path):
    return lambda: any(p.name.startswith(f".{out.stem}.") for p in out.parent.iterdir())


def _commands(app: Path, plan: Path, out: Path) -> list[str]:
    return {
        "explore": [str(app), "--mem", "0", "--out", str(out)],
        "deploy": ["deploy", str(plan), "--out", str(out)],
        "profile": ["profile", str(app), "--out", str(out), "--repeats", "1", "--frames", "1",
                    "--rounds", "1"],
    }


def _target(tmp_path: Path, command: str) -> Path:
    return tmp_path / ("profile.yaml" if command == "profile" else "out")


@pytest.mark.parametrize("command", ["explore", "deploy", "profile"])
def test_sigterm_stops_cleanly(app, plan, tmp_path, command):
    out = _target(tmp_path, command)
    (tmp_path / "tmp").mkdir()
    argv = _commands(app, plan, out)[command]
    proc = _started(argv, tmp_path / "tmp", _tmp_sibling(out))
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, (proc.returncode, stderr[-2000:])
    assert "Traceback" not in stderr + stdout, stderr
    last = stderr.strip().splitlines()[-1]
    assert last == f"explore: terminated: {out} not written (partial output removed)", stderr[-2000:]
    assert _leftovers(out) == [] and not out.exists()
    assert list((tmp_path / "tmp").iterdir()) == []          # nothing left in TMPDIR either
    if command != "explore":       # the next run succeeds without --force (the search: below)
        return
    assert main([*argv[:-2], "--out", str(out), "--generations", "2", "--population", "8",
                 "--quiet"]) in (0, 3)


@pytest.mark.parametrize("command", ["explore", "deploy", "profile"])
def test_after_sigkill_the_next_run_takes_over(app, plan, tmp_path, command):
    out = _target(tmp_path, command)
    (tmp_path / "tmp").mkdir()
    argv = _commands(app, plan, out)[command]
    proc = _started(argv, tmp_path / "tmp", _tmp_sibling(out))
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    left = _leftovers(out)
    assert any(name.startswith(f".{out.stem}.{proc.pid}-") for name in left), left
    if command != "profile":
        assert CLAIM in left
    scratch = [p.name for p in (tmp_path / "tmp").iterdir()]
    assert [name.startswith(f"memtrade-{proc.pid}-") for name in scratch] == [True], scratch
    quick = {"explore": ["--generations", "2", "--population", "8", "--quiet"],
             "deploy": [], "profile": []}[command]
    if command == "profile":
        argv = ["profile", str(app.parent / "small.yaml"), *argv[2:]]
    done = subprocess.run([sys.executable, "-m", "explorer.cli.main", *argv, *quick],
                          capture_output=True, text=True, env=_env(tmp_path / "tmp"))
    assert done.returncode in (0, 3), done.stderr[-2000:]   # 3: see `plan`
    assert "Traceback" not in done.stderr
    if command != "profile":
        assert f"(process {proc.pid}) is gone; taking its claim over" in done.stderr
    assert _leftovers(out) == [] and out.exists()
    assert list((tmp_path / "tmp").iterdir()) == []

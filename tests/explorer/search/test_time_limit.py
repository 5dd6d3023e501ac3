"""`--time-limit` / `search.time_limit`: the search stops with the front found so
far once the budget is spent, writes every output, says where it stopped, and the plan is
one the explorer would deploy; without a limit nothing changes."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from deploy.build.derive import derive as deploy
from explorer.app.appfile import load_app
from explorer.cli.main import main
from explorer.search.deadline import Deadline

ROOT = Path(__file__).resolve().parents[3]
APP1 = ROOT / "apps" / "table12_app1_mobilenet_v2.yaml"


def test_deadline_remembers_the_first_stage_it_stopped():
    assert not Deadline(None).over("anything") and Deadline(None).share(0.5).seconds is None
    late = Deadline(0.0)
    assert late.over("binary NSGA-II generation 1") and late.over("path relinking")
    assert late.stopped == "binary NSGA-II generation 1"
    roomy = Deadline(3600.0)
    assert not roomy.over("x") and roomy.stopped is None
    part = roomy.share(0.0)                 # a spent share stops its stage, not the search
    assert part.over("binary NSGA-II generation 2") and not roomy.over("ladder NSGA-II")
    assert roomy.stopped == "binary NSGA-II generation 2" and 1799 < roomy.share(0.5).seconds <= 1800


def test_a_search_stopped_on_time_writes_a_deployable_plan(tmp_path, capsys):
    """MobileNetV2 (app 1) searches for about 20-60 s here; 3 s, shared between its stages
    (40% binary run, 75% of the rest the ladder run, then relinking), stop it early in each."""
    out, limit = tmp_path / "run", 3.0
    start = time.perf_counter()
    assert main([str(APP1), "--mem", "0", "--time-limit", str(limit), "--workers", "1", "--effort", "full",
                 "--out", str(out), "--quiet"]) == 0          # the least-memory goal
    elapsed = time.perf_counter() - start
    front = json.loads((out / "pareto.json").read_text())
    plan = json.loads((out / "plan.json").read_text())
    assert front["time_limit"] == limit and front["stopped_on_time"].startswith("binary NSGA-II")
    assert front["seconds"] < limit + 3 and elapsed < limit + 15    # load + one step
    assert plan["genes"] in [p["genes"] for p in front["points"]]
    assert plan["memory_bytes"] == min(p["memory_bytes"] for p in front["points"])
    assert "search: stopped on time at binary NSGA-II" in capsys.readouterr().out
    app = load_app(APP1)
    manifest = deploy(plan, app.cnns, tmp_path / "dep")      # checks the plan first
    assert manifest.arena_bytes == plan["buffer_bytes"]


def test_without_a_limit_the_search_runs_to_its_end(tmp_path):
    out = tmp_path / "run"
    assert main([str(ROOT / "apps" / "worked_example.yaml"), "--mem", "0", "--population", "8",
                 "--generations", "3", "--out", str(out), "--quiet"]) == 0
    front = json.loads((out / "pareto.json").read_text())
    assert front["time_limit"] is None and front["stopped_on_time"] is None
    assert front["generations"] == 3


@pytest.mark.parametrize("flag, value", [("--time-limit", "0"), ("--time-limit", "-1"),
                                         ("--time-limit", "1e9"), ("search", "soon")])
def test_bad_time_limits_are_one_line(tmp_path, capsys, flag, value):
    app = ROOT / "apps" / "worked_example.yaml"
    argv = [str(app), "--out", str(tmp_path / "run"), "--quiet"]
    if flag == "search":
        text = app.read_text().replace("search: {", f"search: {{time_limit: {value}, ", 1)
        app = tmp_path / "app.yaml"
        app.write_text(text)
        argv[0] = str(app)
        where = "search.time_limit"
    else:
        argv += [flag, value]
        where = "--time-limit"
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and where in err and "expected seconds above 0" in err
    assert not (tmp_path / "run").exists()


def test_progress_off_a_terminal_is_one_line_per_stage(tmp_path, capsys):
    """Off a terminal (a log, CI) the bounds come first, then each stage prints its closing
    line, named, with its time; a stage stopped on time closes with the generation it reached."""
    assert main([str(ROOT / "apps" / "worked_example.yaml"), "--mem", "0", "--population", "8",
                 "--generations", "3", "--out", str(tmp_path / "run")]) == 0
    bounds, *lines = capsys.readouterr().err.strip().splitlines()
    assert bounds.startswith("bounds  the weights alone ")
    assert [line.split(":")[0] for line in lines] == ["binary NSGA-II", "ladder NSGA-II",
                                                      "memory descent", "path relinking",
                                                      "local search", "path relinking"]
    assert all("gen   3/3" in line for line in lines[:2])
    assert "batch" in lines[2]
    assert all("round" in line and "/16" in line for line in (lines[3], lines[5]))
    assert all("s left in this stage" in line for line in lines)
    assert main([str(APP1), "--mem", "0", "--time-limit", "1", "--workers", "1", "--effort", "full",
                 "--out", str(tmp_path / "late")]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "NSGA-II" in line]
    # the budget counts from building the evaluator: the ladder stage may not start at all
    assert [line.split(":")[0] for line in lines] in (["binary NSGA-II"],
                                                      ["binary NSGA-II", "ladder NSGA-II"])
    assert all("/60" in line and "gen  60/60" not in line for line in lines)   # cut short

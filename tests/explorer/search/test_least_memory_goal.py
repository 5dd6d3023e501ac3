"""The question asked is the question answered: throughput targets with no memory budget, or a
budget of 0, get the least memory meeting the targets (exit 0); a budget that reuse alone meets
keeps the paper's early exit (explorer/search/pick.py search_needed)."""
from __future__ import annotations

import json

import pytest

from explorer.cli.main import main
from explorer.search.pick import Point, pick, search_needed

APP = """name: small-goal
platform: jetson-tx2
precision: fp32
cnns:
  - name: net
    model: zoo:resnet_small
"""
FAST = ["--population", "20", "--generations", "8", "--workers", "1", "--quiet"]


@pytest.fixture(scope="module")
def app_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("goal") / "app.yaml"
    path.write_text(APP)
    return path


def _explore(app_file, tmp_path, capsys, *argv):
    out = tmp_path / "out"
    code = main([str(app_file), "--out", str(out), *FAST, *argv])
    text = capsys.readouterr().out
    return code, text, json.loads((out / "plan.json").read_text()), \
        json.loads((out / "pareto.json").read_text())


def test_fps_alone_is_the_least_memory_meeting_it(app_file, tmp_path, capsys):
    code, _, reuse, _ = _explore(app_file, tmp_path / "reuse", capsys)       # no constraint
    assert code == 0 and not any(reuse["genes"])                             # reuse only
    target = 0.9 * reuse["fps"]["net"]
    code, text, plan, front = _explore(app_file, tmp_path / "fps", capsys, "--fps", f"{target}")
    assert code == 0
    meeting = [p["memory_bytes"] for p in front["points"] if p["fps"]["net"] >= target]
    assert plan["memory_bytes"] == min(meeting) < reuse["memory_bytes"]
    assert plan["fps"]["net"] >= target and plan["constraints_met"]
    assert "early exit" not in text and "the least memory meeting the constraints" in text


def test_memory_zero_is_a_goal_met(app_file, tmp_path, capsys):
    code, text, plan, front = _explore(app_file, tmp_path, capsys, "--mem", "0")
    assert code == 0 and plan["constraints_met"]
    assert plan["memory_bytes"] == min(p["memory_bytes"] for p in front["points"])
    assert "the least memory: the goal" in text and "NOT met" not in text
    assert "the goal: memory 0" in text


def test_budget_met_by_reuse_exits_early(app_file, tmp_path, capsys):
    code, text, plan, front = _explore(app_file, tmp_path, capsys, "--mem", "1GB", "--fps", "1")
    assert code == 0 and not any(plan["genes"]) and len(front["points"]) == 1
    assert "early exit" in text


@pytest.mark.parametrize("mem, fps, prefer, needed", [
    (None, {}, None, False),          # nothing asked: reuse alone, the fastest plan
    (None, {"a": 30.0}, None, True),  # a target alone: the least memory meeting it
    (0, {}, None, True),              # the least-memory goal
    (200, {"a": 30.0}, None, False),  # the paper's early exit: reuse fits M^c
    (200, {}, "memory", True),        # asked for the least memory within the budget
    (50, {}, None, True),             # reuse does not fit M^c
])
def test_search_needed(mem, fps, prefer, needed):
    assert search_needed(Point((0,), 100, {"a": 60.0}), mem, fps, prefer) is needed


def test_goal_picks_least_memory_meeting_targets():
    front = [Point((1,), 50, {"a": 10.0}), Point((2,), 70, {"a": 31.0}), Point((0,), 100, {"a": 60.0})]
    assert pick(front, 0, {"a": 30.0}) == (front[1], True)
    assert pick(front, 0, {}) == (front[0], True)
    assert pick(front, 0, {"a": 99.0}) == (front[0], False)


def test_bounds_printed_before_the_search(app_file, tmp_path, capsys):
    """The weights alone and the reuse-only plan, as their own runs give them."""
    _, _, reuse, _ = _explore(app_file, tmp_path / "reuse", capsys)
    main([str(app_file), "--out", str(tmp_path / "b"), "--population", "8", "--generations", "2",
          "--workers", "1", "--mem", "0"])
    err = capsys.readouterr().err.splitlines()
    from explorer.app.units import format_bytes
    assert err[0] == (f"bounds  the weights alone {format_bytes(reuse['param_bytes'])} (no plan "
                      f"holds less); reuse only (every layer whole) "
                      f"{format_bytes(reuse['memory_bytes'])} at net {reuse['fps']['net']:.2f} fps")

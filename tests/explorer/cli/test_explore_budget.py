"""`explore`'s time budget and the seconds of each stage it prints at the end."""
from __future__ import annotations

import json
import re
import time

from explorer.app.model import SearchSettings
from explorer.cli.main import main
from explorer.search.effort import TIME_LIMIT_S, time_budget


def test_the_default_budget_and_what_overrides_it():
    assert time_budget(SearchSettings()) == TIME_LIMIT_S == 100.0
    assert time_budget(SearchSettings(time_limit=7.5)) == 7.5
    assert time_budget(SearchSettings(effort="full")) is None
    assert time_budget(SearchSettings(effort="full", time_limit=3.0)) == 3.0


def test_explore_prints_each_stage_and_keeps_a_tiny_limit(tmp_path, capsys):
    app = tmp_path / "app.yaml"
    app.write_text("name: vgg\ncnns:\n  - {name: n, model: 'zoo:vgg_small'}\n")
    out = tmp_path / "run"
    start = time.perf_counter()
    assert main([str(app), "--mem", "0", "--time-limit", "1", "--workers", "1", "--quiet",
                 "--out", str(out)]) == 0          # the least-memory goal
    elapsed = time.perf_counter() - start
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("stages  "))
    assert line.endswith(" (time budget 1 s)")
    body = line[len("stages  "):-len(" (time budget 1 s)")]
    stages = [re.fullmatch(r"(.+) ([0-9.]+) s", part).groups() for part in body.split(", ")]
    names = [name for name, _ in stages]
    assert names[:3] == ["import", "analysis", "calibration"] and names[-1] == "outputs"
    assert set(names[3:-1]) <= {"binary NSGA-II", "ladder NSGA-II", "memory descent",
                                "path relinking", "local search", "setup"}
    assert "binary NSGA-II" in names
    front = json.loads((out / "pareto.json").read_text())
    assert front["stopped_on_time"] and front["time_limit"] == 1.0
    total = sum(float(s) for _, s in stages)
    assert total < 1 + 3 and elapsed < 1 + 15          # one slice past it, load
    assert "search: stopped on time at" in text

"""`explore deploy PLAN.json --point N` deploys any point of the front: the chosen point's
deployment equals the plain deploy of plan.json, another point's plan holds the memory its
row of pareto.json lists."""
from __future__ import annotations

import json

import pytest

from memtrade.front_point import plan_of_point
from explorer.cli.main import main

APP = "name: pts\ncnns:\n  - {name: net, model: 'zoo:resnet_small'}\n"


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    root = tmp_path_factory.mktemp("points")
    (root / "app.yaml").write_text(APP)
    assert main([str(root / "app.yaml"), "--mem", "0", "--fps", "900", "--population", "8",
                 "--generations", "3", "--workers", "1", "--quiet", "--out", str(root / "o")]) == 0
    return root / "o"


def test_chosen_point_deploys_as_the_plan(explored, tmp_path):
    front = json.loads((explored / "pareto.json").read_text())
    plan = json.loads((explored / "plan.json").read_text())
    n = [p["genes"] for p in front["points"]].index(plan["genes"])
    assert main(["deploy", str(explored / "plan.json"), "--point", str(n), "--out", str(tmp_path / "a")]) == 0
    assert main(["deploy", str(explored / "plan.json"), "--out", str(tmp_path / "b")]) == 0
    assert json.loads((tmp_path / "a" / "manifest.json").read_text()) == \
        json.loads((tmp_path / "b" / "manifest.json").read_text())


def test_every_point_holds_its_listed_memory(explored):
    front = json.loads((explored / "pareto.json").read_text())
    for n, point in enumerate(front["points"]):
        plan = plan_of_point(explored / "pareto.json", n)
        assert plan.memory_bytes == point["memory_bytes"] and list(plan.genes) == point["genes"]
        assert plan.constraints_met == (point["fps"]["net"] >= 900)


def test_point_out_of_range_is_one_line(explored, tmp_path, capsys):
    count = len(json.loads((explored / "pareto.json").read_text())["points"])
    assert main(["deploy", str(explored / "pareto.json"), "--point", str(count),
                 "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"explore: error: --point: expected 0 to {count - 1} (the points of "
                   f"{explored / 'pareto.json'}), got {count}")
    assert not (tmp_path / "x").exists()

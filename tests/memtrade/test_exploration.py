"""memtrade.explore: the front as typed points, the plan of any point, and `write` giving
exactly the files the `explore` command writes for the same app and settings."""
from __future__ import annotations

import json

import pytest

import memtrade
from deploy_fixtures import tiny_app_file
from explorer.cli.main import main

SETTINGS = dict(effort="full", population=8, generations=3, relink_rounds=1, local_rounds=0,
                workers=1, seed=2)
FLAGS = ["--effort", "full", "--population", "8", "--generations", "3", "--relink-rounds", "1",
         "--local-rounds", "0", "--workers", "1", "--seed", "2", "--quiet"]


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exploration")
    app = tiny_app_file(folder)
    assert main([str(app), "--mem", "0", "--out", str(folder / "cli"), *FLAGS]) == 0
    found = memtrade.explore(memtrade.load_app(app), mem=0, **SETTINGS)
    found.write(folder / "api")
    return found, folder / "cli", folder / "api"


def test_write_gives_the_commands_files(both):
    found, cli, api = both
    assert sorted(p.name for p in cli.iterdir()) == sorted(p.name for p in api.iterdir())
    assert json.loads((cli / "plan.json").read_text()) == json.loads((api / "plan.json").read_text())
    a, b = (json.loads((d / "pareto.json").read_text()) for d in (cli, api))
    assert {k: v for k, v in a.items() if k != "seconds"} == {k: v for k, v in b.items() if k != "seconds"}
    for name in [p.name for p in cli.iterdir() if p.suffix in (".csv", ".xml")]:
        assert (cli / name).read_bytes() == (api / name).read_bytes(), name


def test_points_are_the_front_written(both):
    found, cli, _ = both
    written = json.loads((cli / "pareto.json").read_text())["points"]
    assert [(list(p.genes), p.memory_bytes, dict(p.fps)) for p in found.points] == \
        [(w["genes"], w["memory_bytes"], w["fps"]) for w in written]
    assert [p.index for p in found.points] == list(range(len(written)))
    assert found.chosen.memory_bytes == found.plan.memory_bytes == min(p.memory_bytes for p in found.points)
    for point in found.points:
        plan = found.plan_of(point)
        assert plan.memory_bytes == point.memory_bytes and dict(plan.fps) == dict(point.fps)
    with pytest.raises(AttributeError):     # records are frozen (FrozenInstanceError)
        found.points[0].memory_bytes = 0


def test_a_notebook_shows_the_front_and_the_chosen_plan(both):
    found, _, _ = both
    page = found._repr_html_()
    assert page.count("<svg") >= 2 and "memtrade: tiny-app" in page
    assert found.summary()[0].startswith("app tiny-app: 1 CNN(s)")


def test_write_refuses_a_folder_in_use(both, tmp_path):
    found, _, _ = both
    (tmp_path / "mine.txt").write_text("keep")
    with pytest.raises(memtrade.InputError, match="--force"):
        found.write(tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep"

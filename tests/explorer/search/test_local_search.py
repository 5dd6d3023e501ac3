"""Pareto local search toward whole layers (explorer/search/local_search.py): the neighbourhood,
a front that only improves, the Pareto-local-optimum property when it stops on its own,
each chromosome asked once (and `seen` kept up to date), and the ladder search's last
stage on the worked example."""
from __future__ import annotations

from dataclasses import replace

from explorer.app.model import SearchSettings
from explorer.plan.derive import Evaluation
from explorer.plan.genes import gene_space
from explorer.search.local_search import pareto_local_search, toward_whole
from explorer.search.pick import Point
from explorer.search.algorithm2 import algorithm2
from explorer.search.pick import merge_fronts
from explorer.throughput.evaluator import make_evaluator
from test_genes import UP, app, toy  # noqa: F401  (fixture)


def point(genes) -> Point:
    mem, fps = toy(genes)
    return Point(tuple(genes), mem, fps)


def weakly_dominated(p, q) -> bool:
    return all(q.memory_bytes <= p.memory_bytes and q.fps[c] >= p.fps[c] for c in p.fps)


def test_toward_whole_lowers_one_by_parts_gene():
    assert toward_whole((0, 2, 1)) == [(0, 1, 1), (0, 2, 0)]
    assert toward_whole((0, 0)) == []


def test_stops_at_a_pareto_local_optimum_set_asking_each_chromosome_once():
    asked = []

    def counting(genes):
        asked.append(genes)
        return toy(genes)

    start = [point(tuple(UP))]                                 # every layer row by row
    seen = {(0, 0, 0)}
    front, evaluated = pareto_local_search(start, ["net"], counting, rounds=100, seen=seen)
    assert evaluated == len(asked) == len(set(asked)) and (0, 0, 0) not in asked
    assert set(asked) | {tuple(UP)} <= seen                   # `seen` kept up to date
    assert asked[:3] == toward_whole(tuple(UP))               # round 1: the start's moves
    assert merge_fronts(front) == front and len(front) > 2
    assert any(weakly_dominated(start[0], q) for q in front)
    for p in front:                                           # no move toward whole improves
        for n in toward_whole(p.genes):
            if n != (0, 0, 0):
                assert any(weakly_dominated(point(n), q) for q in front)


def test_zero_rounds_and_seen_neighbours():
    start = [point((1, 1, 0))]
    assert pareto_local_search(start, ["net"], toy, rounds=0) == (start, 0)
    seen = set(toward_whole((1, 1, 0)))
    assert pareto_local_search(start, ["net"], toy, rounds=3, seen=seen) == (start, 0)


def ladder_searches(app, stage: str, rounds: tuple[int, ...]):
    """The worked example's ladder search (no early exit) with `stage` at each of `rounds`."""
    settings = SearchSettings(population=12, generations=4, seed=2, workers=1)
    evaluator = make_evaluator(app)
    app.memory = 1
    return [algorithm2(app, Evaluation(app, evaluator, space=gene_space(app, "ladder")),
                       replace(settings, **{stage: r})) for r in rounds]


def test_ladder_search_ends_with_local_search(app):  # noqa: F811
    plain, searched = ladder_searches(app, "local_rounds", (0, 2))
    assert searched.result.unique > plain.result.unique
    assert all(any(weakly_dominated(p, q) for q in searched.front) for p in plain.front)

"""Path relinking (explorer/search/path_relinking.py): steps toward a neighbour, a front that only
improves, each chromosome asked once, the end of a path reached when nothing stops it, and
the ladder search's last stage on the worked example."""
from __future__ import annotations

import itertools

from explorer.search.path_relinking import relink, steps_toward
from explorer.search.pick import merge_fronts
from test_genes import UP, app, toy  # noqa: F401  (fixture)
from test_local_search import ladder_searches, point, weakly_dominated


def test_steps_toward_one_rung_per_differing_gene():
    assert steps_toward((0, 2, 4), (3, 2, 1)) == [(1, 2, 4), (0, 2, 3)]
    assert steps_toward((1, 1), (1, 1)) == []


def test_relinking_fills_the_path_and_asks_each_chromosome_once():
    asked = []

    def counting(genes):
        asked.append(genes)
        return toy(genes)

    start = [point((0, 0, 0)), point(tuple(UP))]
    front, evaluated = relink(start, ["net"], counting, rounds=100)
    assert evaluated == len(asked) == len(set(asked))
    assert not set(asked) & {p.genes for p in start}
    assert merge_fronts(front) == front                      # non-dominated, sorted
    assert all(any(weakly_dominated(p, q) for q in front) for p in start)
    # the first round asks exactly the steps from each end toward the other
    assert set(asked[:6]) == set(steps_toward((0, 0, 0), UP) + steps_toward(tuple(UP), (0, 0, 0)))
    # stopped on its own: every step between neighbours of the final front was asked
    known = set(asked) | {p.genes for p in start}
    for p, q in zip(front, front[1:]):
        assert set(steps_toward(p.genes, q.genes) + steps_toward(q.genes, p.genes)) <= known
    everything = merge_fronts([point(g) for g in itertools.product(*(range(u + 1) for u in UP))])
    optimal = {(t.memory_bytes, t.fps["net"]) for t in everything}
    assert len({(q.memory_bytes, q.fps["net"]) for q in front} & optimal) > len(start)


def test_zero_rounds_and_seen_chromosomes():
    start = [point((0, 0, 0)), point((1, 0, 0))]
    assert relink(start, ["net"], toy, rounds=0) == (start, 0)
    assert relink(start, ["net"], toy, rounds=3) == (start, 0)   # neighbours one rung apart
    seen = set(steps_toward((0, 0, 0), (2, 0, 1)))          # (1, 0, 0) and (0, 0, 1)
    asked = []
    far = [point((0, 0, 0)), point((2, 0, 1))]
    relink(far, ["net"], lambda g: asked.append(g) or toy(g), rounds=1, seen=seen)
    assert sorted(asked) == [(1, 0, 1), (2, 0, 0)]          # only the other end's steps


def test_ladder_search_relinks_its_front(app):  # noqa: F811
    plain, relinked = ladder_searches(app, "relink_rounds", (0, 4))
    assert relinked.result.unique > plain.result.unique
    assert all(any(weakly_dominated(p, q) for q in relinked.front) for p in plain.front)
    # relinking finds a point the front without it does not hold or dominate
    assert any(not any(weakly_dominated(p, q) for q in plain.front) for p in relinked.front)



def test_ladder_search_relinks_after_local_search(app, monkeypatch):  # noqa: F811
    """The last stage relinks the local search's front (its new points have neighbours no
    relinking saw), and the search returns what that relinking returns."""
    from explorer.search import staged as search

    calls = []

    def local(front, *args):
        calls.append(("local", [p.genes for p in front]))
        out = search_local(front, *args)
        calls.append(("local out", [p.genes for p in out[0]]))
        return out

    def relinking(front, *args):
        calls.append(("relink", [p.genes for p in front]))
        out = search_relink(front, *args)
        calls.append(("relink out", [p.genes for p in out[0]]))
        return out

    search_local, search_relink = search.pareto_local_search, search.relink
    monkeypatch.setattr(search, "pareto_local_search", local)
    monkeypatch.setattr(search, "relink", relinking)
    (final,) = ladder_searches(app, "local_rounds", (2,))
    assert [c[0] for c in calls] == ["relink", "relink out", "local", "local out", "relink",
                                     "relink out"]
    assert calls[4][1] == calls[3][1] and calls[5][1] == [p.genes for p in final.result.front]

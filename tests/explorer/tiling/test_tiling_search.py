"""The combined search (explorer/tiling/search.py): its front weakly dominates the row-parts
front and the fused-tiles front, each computed here by its own search; the embedding keeps
every single-mode point's memory and fps exactly; nsga2's archive keeps every evaluated
point."""
from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.search.algorithm2 import nsga2
from explorer.throughput.evaluator import make_evaluator
from explorer.tiling.search import embed, search_modes
from test_fused_tiling import app  # noqa: F401  (the small two-group network)


def test_combined_front_weakly_dominates_each_single_mode_front(app):  # noqa: F811
    from explorer.app.appfile import load_app
    app = load_app(str(app.path), mem="1KB")        # below reuse: the searches run
    settings = replace(app.search, population=8, generations=2, seed=5, granularity="binary")
    modes = search_modes(app, make_evaluator(app), settings, "binary")
    both = modes["both"]
    for mode in ("parts", "tiles"):
        front = modes[mode].front
        assert front
        for p in front:
            # the embedded chromosome evaluates to the single-mode point exactly
            mem, fps = both.evaluation(embed(p.genes, mode, both.evaluation))
            assert (mem, fps["small"]) == (p.memory_bytes, pytest.approx(p.fps["small"], rel=0, abs=0))
            assert any(q.memory_bytes <= p.memory_bytes and q.fps["small"] >= p.fps["small"]
                       for q in both.front), (mode, p)
    # and the combined front is non-dominated within itself
    pts = [(q.memory_bytes, q.fps["small"]) for q in both.front]
    assert not any(a != b and a[0] <= b[0] and a[1] >= b[1] for a in pts for b in pts)
    # the two single searches reach points the other cannot: the combination has both kinds
    ev = both.evaluation
    kinds = {(any(ev.split(q.genes)[0]), any(ev.split(q.genes)[1])) for q in both.front}
    assert len(both.front) > 1 and any(tiled for _, tiled in kinds)


def test_archive_keeps_every_evaluated_point_and_seeds_enter():
    """A point selection drops still reaches the front: with population 4 and 6 mutually
    non-dominated seeds, all 6 are on the returned front."""
    from explorer.app.model import SearchSettings
    table = {(i, j): (10 * (i + 2 * j), {"n": float(i + 2 * j)}) for i in range(4) for j in range(3)}
    seeds = [(1, 0), (2, 0), (3, 0), (1, 1), (3, 1), (2, 2)]   # memories 10..60, all distinct

    res = nsga2([3, 2], ["n"], lambda g: table[tuple(g)],
                SearchSettings(population=4, generations=1, seed=2, mutation=0.0, crossover=0.0),
                seeds=seeds)
    front = {p.memory_bytes for p in res.front}
    # memory and fps rise together: every distinct memory level is a non-dominated point
    assert {table[s][0] for s in seeds} <= front
    with pytest.raises(ValueError):
        nsga2([3, 2], ["n"], lambda g: table[tuple(g)], SearchSettings(population=4, generations=1),
              seeds=[(1, 0, 0)])

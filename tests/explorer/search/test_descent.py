"""The descent from the least memory (explorer/search/descent.py): its moves, a local optimum
reached (every move from the result checked independently), each chromosome asked once and
never one evaluated before, the cap, the deadline, and the same result on every run."""
from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings, strategies as st

from explorer.search.deadline import Deadline
from explorer.search.descent import BATCH, descend, move
from explorer.search.pick import Point

UPPER = [3, 1, 4, 2, 5, 3]


def bowl(target):
    """Memory: distance of each gene from `target` (weighted), fps rising with whole genes."""
    def evaluate(genes):
        mem = 1000 + sum((i + 1) * abs(g - t) for i, (g, t) in enumerate(zip(genes, target)))
        return mem, {"n": 100.0 - sum(genes)}
    return evaluate


def point(evaluate, genes) -> Point:
    mem, fps = evaluate(genes)
    return Point(tuple(genes), mem, fps)


def test_moves_are_to_whole_one_rung_toward_parts_one_rung_toward_whole_within_the_ladder():
    genes, upper = (0, 2, 4), [3, 3, 4]
    assert [move(genes, upper, kind, 1) for kind in range(3)] == [(0, 0, 4), (0, 3, 4), (0, 1, 4)]
    assert [move(genes, upper, kind, 0) for kind in range(3)] == [None, (1, 2, 4), None]
    assert [move(genes, upper, kind, 2) for kind in range(3)] == [(0, 2, 0), None, (0, 2, 3)]
    assert move((0, 1, 4), upper, 2, 1) is None       # toward whole from rung 1 is to whole


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=6, max_size=6).map(
    lambda t: tuple(min(a, u) for a, u in zip(t, UPPER))),
    st.lists(st.integers(0, 5), min_size=6, max_size=6).map(
    lambda s: tuple(min(a, u) for a, u in zip(s, UPPER))))
def test_reaches_a_local_optimum_asking_each_chromosome_once(target, start):
    asked = []
    evaluate = bowl(target)

    def counting(genes):
        asked.append(genes)
        return evaluate(genes)

    front, n = descend([point(evaluate, start)], ["n"], counting, UPPER)
    best = min(front, key=lambda p: p.memory_bytes)
    # every move from the result has no less memory, computed here
    for i in range(len(UPPER)):
        for v in range(UPPER[i] + 1):
            if abs(v - best.genes[i]) == 1 or v == 0:
                other = best.genes[:i] + (v,) + best.genes[i + 1:]
                assert evaluate(other)[0] >= best.memory_bytes
    # this bowl's only local optimum under these moves is its target
    assert best.genes == target and best.memory_bytes == 1000
    assert n == len(asked) == len(set(asked)) and start not in asked


def test_skips_the_chromosomes_seen_and_adds_the_ones_it_asks():
    evaluate = bowl((0,) * 6)
    start = (1, 1, 1, 1, 1, 1)
    seen = {start[:i] + (0,) + start[i + 1:] for i in range(3)}   # genes 0-2 to whole
    asked = []
    front, n = descend([point(evaluate, start)], ["n"], lambda g: asked.append(g) or evaluate(g),
                       UPPER, seen)
    assert not set(asked) & {start[:i] + (0,) + start[i + 1:] for i in range(3)}
    assert set(asked) <= seen and n == len(asked)


def test_the_cap_and_the_deadline_stop_it_between_batches():
    evaluate = bowl((3, 1, 4, 2, 5, 3))
    asked = []
    descend([point(evaluate, (0,) * 6)], ["n"], lambda g: asked.append(g) or evaluate(g),
            UPPER, limit=5)
    assert len(asked) == 5
    asked.clear()
    deadline = Deadline(0.0)
    front, n = descend([point(evaluate, (0,) * 6)], ["n"],
                       lambda g: asked.append(g) or evaluate(g), UPPER, deadline=deadline)
    assert n == 0 and asked == [] and deadline.stopped == "memory descent"
    assert [p.genes for p in front] == [(0,) * 6]


def test_the_front_keeps_every_non_dominated_point_and_runs_repeat():
    rnd = random.Random(7)
    table = {g: (rnd.randint(1, 50), {"n": float(rnd.randint(1, 50))})
             for g in itertools.product(*(range(u + 1) for u in UPPER))}
    start = [Point(g, table[g][0], table[g][1]) for g in [(0,) * 6, tuple(UPPER)]]
    runs = [descend(list(start), ["n"], table.__getitem__, UPPER) for _ in range(2)]
    assert runs[0] == runs[1]
    front, n = runs[0]
    met = set(p.genes for p in start) | {p.genes for p in front}
    for p in front:      # non-dominated among the points it holds
        assert not any(q.memory_bytes <= p.memory_bytes and q.fps["n"] >= p.fps["n"]
                       and (q.memory_bytes, q.fps["n"]) != (p.memory_bytes, p.fps["n"])
                       for q in front)
    assert min(p.memory_bytes for p in front) <= min(p.memory_bytes for p in start)
    assert n >= BATCH or n == len(met) - 2


@pytest.mark.parametrize("front", [[], None])
def test_nothing_to_descend_from(front):
    assert descend(front or [], ["n"], bowl((0,) * 6), UPPER) == ([], 0)

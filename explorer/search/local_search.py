"""Pareto local search toward whole layers, the last stage of a ladder search (Paquete,
Chiarandini & Stützle 2004, "Pareto local optimum sets in the biobjective traveling
salesman problem", Algorithm PLS; after a genetic algorithm as in the memetic scheme of
Deb & Goel 2001, "A hybrid multi-objective evolutionary approach to engineering shape
design").

The neighbourhood of a front point is every chromosome with one of its by-parts layers one
rung toward whole (explorer.plan.genes: a gene one value lower; the layer keeps more rows per
phase): a little more memory for a little more fps, which is how a front between the least
memory and reuse-only is walked. The first round explores every front point, later rounds
the points that entered the front in the round before; the chromosomes never seen are
evaluated in one batch per round (explorer.search.parallel spreads it over the workers) and the
non-dominated union is kept. Stops when a round adds no point or after `rounds` rounds.

Why this neighbourhood (docs/search.md, "Why path relinking, then a local search toward
whole layers"): over the moves one rung either way
of every gene some front point parts, on Table 12's app 1, 69 of the 74 moves that entered
the front went toward whole, 5 of 941 the other way. Deterministic: neighbours are made
and evaluated in the front's order.
"""
from __future__ import annotations

import time
from typing import Callable, Iterable

from explorer.search.deadline import NONE, Deadline
from explorer.search.pick import Point, merge_fronts
from explorer.search.problem import Evaluate, Key, as_batch
from explorer.search.progress import GenerationStats, Progress

Moves = Callable[[list[Point], set[Key]], Iterable[Key]]
SLICE = 32        # most chromosomes evaluated between time-limit checks in a round


def improve(front: list[Point], cnns: list[str], evaluate: Evaluate, rounds: int,
            seen: set[Key] | None, moves: Moves, deadline: Deadline = NONE,
            stage: str = "local search", limit: int | None = None,
            progress: Progress | None = None) -> tuple[list[Point], int]:
    """The loop both last stages share: up to `rounds` rounds, each asking `moves(front,
    fresh)` for the chromosomes next to the points that entered the front last round (every
    point at first), evaluating the ones never seen (in slices of at most SLICE, each one batch:
    explorer.search.problem.Batch) and keeping the non-dominated union; stops early when a
    round asks or adds nothing. Returns (the front, chromosomes evaluated); `seen` is
    updated. `deadline` ends it between slices once the search's time is spent
    (explorer/search/deadline.py); `limit` caps the chromosomes evaluated (the first ones
    asked, in order: explorer/search/effort.py); `progress` gets a line after every slice."""

    seen = set() if seen is None else seen
    seen |= {p.genes for p in front}
    fresh, evaluated = {p.genes for p in front}, 0
    many = as_batch(evaluate).many
    start = time.perf_counter()

    def report(k: int, last: bool) -> None:
        if progress:
            progress(GenerationStats(k, rounds, evaluated, evaluated, time.perf_counter() - start,
                                     len(front), min((p.memory_bytes for p in front), default=0),
                                     stage, last, "round"))

    k = 0
    for k in range(1, rounds + 1):
        if deadline.over(f"{stage} round {k}"):
            break
        keys: list[Key] = []
        for n in moves(front, fresh):
            if n not in seen:
                seen.add(n)
                keys.append(n)
        if limit is not None:
            keys = keys[:max(0, limit - evaluated)]
        if not keys:
            break
        before = {p.genes for p in front}
        # a slice at a time, the deadline asked between them (a round can be long)
        for part in deadline.slices(keys, f"{stage} round {k}", SLICE):
            evaluated += len(part)
            front = merge_fronts(front, [Point(g, int(m), {c: float(f.get(c, 0.0)) for c in cnns})
                                         for g, (m, f) in zip(part, many(part))])
            report(k, False)
        fresh = {p.genes for p in front} - before
        if not fresh:
            break
    report(k, True)
    return front, evaluated


def toward_whole(genes: Key) -> list[Key]:
    """Chromosomes with one by-parts gene of `genes` one rung lower (toward whole)."""
    return [genes[:i] + (g - 1,) + genes[i + 1:] for i, g in enumerate(genes) if g > 0]


def pareto_local_search(front: list[Point], cnns: list[str], evaluate: Evaluate, rounds: int,
                        seen: set[Key] | None = None,
                        deadline: Deadline = NONE, limit: int | None = None,
                        progress: Progress | None = None) -> tuple[list[Point], int]:
    """(the front after at most `rounds` rounds, chromosomes evaluated); `seen`:
    chromosomes already evaluated, not asked again (the set is updated)."""
    return improve(front, cnns, evaluate, rounds, seen,
                   lambda front, fresh: (n for p in front if p.genes in fresh
                                         for n in toward_whole(p.genes)), deadline, limit=limit,
                   progress=progress)

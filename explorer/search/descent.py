"""Iterative improvement of the least memory found, the stage of a ladder search between
its NSGA-II runs and path relinking (Hoos & Stützle 2004, "Stochastic Local Search:
Foundations and Applications", section 1.5: iterative improvement with first-improvement
pivoting; here over batches of neighbours, the best improving one of a batch taken).

The point of the front with the least memory moves, one gene at a time, to the
chromosome with less memory next to it. The moves (explorer.plan.genes: a gene's values
from whole to row by row) are scanned in order, cyclically: every gene to whole, then
every gene one rung toward parts, then every gene one rung toward whole, `BATCH`
chromosomes at a time (one batch each: explorer.search.parallel spreads it over the
workers); after an improvement the scan goes on from where it stands, and it ends once a
whole cycle of moves improves nothing (a local optimum), the cap of evaluations is spent,
or the deadline is over. Every evaluated
chromosome enters the front (a move toward whole also buys fps).

Why: NSGA-II's memory end on a network whose derivations take a fraction of a second
(PaddleOCR's PP-OCRv4 detection, 263 genes, 2-9 derivations per second on a 2-core
machine) is a point where a few layers are in the wrong granularity: from the least
memory of a 100 s run (29.35 MiB) a scan of every gene's three moves in turn, one
process, reached 28.64 MiB in 358 evaluations by moving gene 235 to whole and genes 0
and 1 one rung toward parts (benchmarks/results/search_budget.md); hence the order of the
kinds of move, to whole and toward parts before toward whole.
Chromosomes already evaluated are skipped: none of them has less memory than the front's
least (the front holds every non-dominated point met), so skipping them loses nothing.
Deterministic: the batches are fixed in size and order, the deadline decides only where
it stops.
"""
from __future__ import annotations

import time

from explorer.search.deadline import NONE, Deadline
from explorer.search.pick import Point, merge_fronts
from explorer.search.problem import Evaluate, Key, as_batch
from explorer.search.progress import GenerationStats, Progress

BATCH = 8          # neighbours evaluated together
KINDS = 3          # moves of a gene: to whole, one rung toward parts, one rung toward whole
STAGE = "memory descent"


def move(genes: Key, upper: list[int], kind: int, i: int) -> Key | None:
    """Gene `i` of `genes` to whole (kind 0), one rung toward parts (1), one rung toward
    whole (2); None where that move leaves the ladder or changes nothing (to whole from
    whole, or one rung toward whole from the rung next to whole: kind 0's move)."""
    g = genes[i]
    v = (0, g + 1, g - 1)[kind]
    if v == g or not 0 <= v <= upper[i] or (kind == 2 and v == 0):
        return None
    return genes[:i] + (v,) + genes[i + 1:]


def descend(front: list[Point], cnns: list[str], evaluate: Evaluate, upper: list[int],
            seen: set[Key] | None = None, deadline: Deadline = NONE, limit: int | None = None,
            progress: Progress | None = None) -> tuple[list[Point], int]:
    """(the front with every chromosome the descent evaluated merged in, chromosomes
    evaluated); `seen`: chromosomes evaluated before, not asked again (updated); `limit`
    caps the evaluations (explorer/search/effort.py)."""
    if not front or not upper:
        return front, 0
    seen = set() if seen is None else seen
    seen |= {p.genes for p in front}
    many = as_batch(evaluate).many
    best = min(front, key=lambda p: (p.memory_bytes, p.genes))
    n, at, quiet, evaluated, batches = len(upper) * KINDS, 0, 0, 0, 0
    start = time.perf_counter()

    def report(last: bool) -> None:
        if progress:
            progress(GenerationStats(batches, batches, evaluated, evaluated,
                                     time.perf_counter() - start, len(front),
                                     best.memory_bytes, STAGE, last, "batch"))

    while quiet < n and (limit is None or evaluated < limit):
        keys: list[Key] = []
        while quiet < n and len(keys) < BATCH:      # (kind, gene) pairs in order, cyclic
            k = move(best.genes, upper, at // len(upper), at % len(upper))
            if k is not None and k not in seen:
                keys.append(k)
            at, quiet = (at + 1) % n, quiet + 1
        if limit is not None:
            keys = keys[:limit - evaluated]
        if not keys or deadline.over(STAGE):
            break
        seen.update(keys)
        points = [Point(g, int(m), {c: float(f.get(c, 0.0)) for c in cnns})
                  for g, (m, f) in zip(keys, many(keys))]
        evaluated, batches = evaluated + len(keys), batches + 1
        front = merge_fronts(front, points)
        low = min(points, key=lambda p: (p.memory_bytes, p.genes))
        if low.memory_bytes < best.memory_bytes:
            best, quiet = low, 0
        report(False)
    report(True)
    return front, evaluated

"""Path relinking between neighbouring front points, the last stage of a ladder search
(Glover, Laguna & Martí 2000, "Fundamentals of scatter search and path relinking"; after a
multi-objective GA as in Basseur, Seynhaeve & Talbi 2005, "Path relinking in Pareto
multi-objective genetic algorithms").

NSGA-II keeps its population spread by crowding, so between two front points that are
neighbours in memory, and whose chromosomes differ in a few genes, it often never tries the
chromosomes on the path from one to the other; with ladder genes (explorer.plan.genes) those
in-between plans are the memory levels a user with a budget between the two wants. Each
round takes the points that entered the front last round (the whole front at first) and,
for each, its neighbours in memory order (the next point below and above); every gene in
which the two differ is moved one rung toward the neighbour's value, one gene at a time.
The chromosomes never seen are evaluated in one batch (explorer.search.parallel spreads it over
the workers) and the non-dominated union is kept; the search stops when a round adds no
point or after `rounds` rounds.

Relinking fills gaps between plans that part different layers; explorer/search/local_search.py,
which runs after it, fills those between plans that part the same layers at neighbouring
rungs (docs/search.md, "Why path relinking, then a local search toward whole layers").
Deterministic: moves are made and evaluated in the front's order.
"""
from __future__ import annotations

from typing import Iterator

from explorer.search.deadline import NONE, Deadline
from explorer.search.local_search import Evaluate, Key, improve
from explorer.search.pick import Point
from explorer.search.progress import Progress


def steps_toward(genes: Key, target: Key) -> list[Key]:
    """Chromosomes one rung from `genes` toward `target`, one per gene where they differ."""
    out = []
    for i, (a, b) in enumerate(zip(genes, target)):
        if a != b:
            out.append(genes[:i] + (a + (1 if b > a else -1),) + genes[i + 1:])
    return out


def relink(front: list[Point], cnns: list[str], evaluate: Evaluate, rounds: int,
           seen: set[Key] | None = None, deadline: Deadline = NONE,
           limit: int | None = None, progress: Progress | None = None
           ) -> tuple[list[Point], int]:
    """(the front after at most `rounds` rounds of path relinking, chromosomes evaluated);
    `seen`: chromosomes already evaluated, not asked again (the set is updated); `limit`:
    at most that many evaluated."""
    return improve(front, cnns, evaluate, rounds, seen, _steps_between, deadline,
                   "path relinking", limit, progress)


def _steps_between(front: list[Point], fresh: set[Key]) -> Iterator[Key]:
    """From each fresh point, the steps toward its neighbours in memory order."""
    order = sorted(front, key=lambda p: (p.memory_bytes, p.genes))
    for x, p in enumerate(order):
        if p.genes in fresh:
            for q in order[max(0, x - 1):x] + order[x + 1:x + 2]:
                yield from steps_toward(p.genes, q.genes)

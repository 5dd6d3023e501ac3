"""Path relinking between neighbouring front points, the last stage of a ladder search
(Glover, Laguna & Martí 2000, "Fundamentals of scatter search and path relinking"; after a
multi-objective GA as in Basseur, Seynhaeve & Talbi 2005, "Path relinking in Pareto
multi-objective genetic algorithms").

NSGA-II keeps its population spread by crowding, so between two front points that are
neighbours in memory, and whose chromosomes differ in a few genes, it often never tries the
chromosomes on the path from one to the other; with ladder genes (explorer.genes) those
in-between plans are the memory levels a user with a budget between the two wants. Each
round takes the points that entered the front last round (the whole front at first) and,
for each, its neighbours in memory order (the next point below and above); every gene in
which the two differ is moved one rung toward the neighbour's value, one gene at a time.
The chromosomes never seen are evaluated in one batch (explorer.parallel spreads it over
the workers) and the non-dominated union is kept; the search stops when a round adds no
point or after `rounds` rounds.

Relinking fills gaps between plans that part different layers; explorer/local_search.py,
which runs after it, fills those between plans that part the same layers at neighbouring
rungs (docs/search.md, "Session 3"). Deterministic: moves are made and evaluated in the
front's order.
"""
from __future__ import annotations

from typing import Callable

from explorer.local_search import merge_batch
from explorer.parallel import batch
from explorer.pick import Point

Key = tuple[int, ...]


def steps_toward(genes: Key, target: Key) -> list[Key]:
    """Chromosomes one rung from `genes` toward `target`, one per gene where they differ."""
    out = []
    for i, (a, b) in enumerate(zip(genes, target)):
        if a != b:
            out.append(genes[:i] + (a + (1 if b > a else -1),) + genes[i + 1:])
    return out


def relink(front: list[Point], cnns: list[str],
           evaluate: Callable[[Key], tuple[int, dict[str, float]]], rounds: int,
           seen: set[Key] | None = None) -> tuple[list[Point], int]:
    """(the front after at most `rounds` rounds of path relinking, chromosomes evaluated);
    `seen`: chromosomes already evaluated, not asked again (the set is updated)."""
    seen = set() if seen is None else seen
    seen |= {p.genes for p in front}
    fresh, evaluated = {p.genes for p in front}, 0
    many = batch(evaluate)
    for _ in range(rounds):
        order = sorted(front, key=lambda p: (p.memory_bytes, p.genes))
        keys: list[Key] = []
        for x, p in enumerate(order):
            if p.genes not in fresh:
                continue
            for q in order[max(0, x - 1):x] + order[x + 1:x + 2]:
                for n in steps_toward(p.genes, q.genes):
                    if n not in seen:
                        seen.add(n)
                        keys.append(n)
        if not keys:
            break
        evaluated += len(keys)
        front, fresh = merge_batch(front, keys, cnns, many)
        if not fresh:
            break
    return front, evaluated

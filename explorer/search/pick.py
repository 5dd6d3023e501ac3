"""Points of a Pareto front: merging fronts into one, and choosing one point of it.

Two rules choose among the points that meet M^c and every T^c_n:
- "memory": the least-memory point (Algorithm 2, lines 9-16, the paper's rule); ties go to the
  higher total fps, then to the earlier point;
- "fps": the highest throughput, the geometric mean of the CNNs' fps (one CNN: its fps; the
  mean weighs each CNN's relative speed-up alike, whatever its frame rate); ties go to less
  memory, then to the earlier point.
`pick_rule` says which applies: `prefer` when the user gave one; the "fps" rule when only a
memory budget constrains the application (a user who gives only a budget expects the fastest
plan within it); the paper's rule otherwise (both constraints, only T^c, or none).
When no point meets them all, either rule returns the least-memory point of the front (the
paper still returns it, and `explore` exits 3).

A memory budget of 0 (`--mem 0`, `memory: 0`) asks for the least memory as a goal, not as a
constraint no plan meets: the least-memory point meeting every T^c is picked and counts as
meeting the constraints. `search_needed` says when Algorithm 2's early exit (reuse alone meets
M^c) answers the question asked and when the search must run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from explorer.app.model import PREFER


@dataclass(frozen=True)
class Point:
    """One evaluated chromosome: genes in gene order, memory in bytes, fps per CNN."""
    genes: tuple[int, ...]
    memory_bytes: int
    fps: dict[str, float] = field(default_factory=dict, hash=False, compare=False)


def least_memory_goal(mem: int | None) -> bool:
    """True when the memory budget asks for the least memory (0) rather than bounding it."""
    return mem == 0


def search_needed(reuse: Point, mem: int | None, fps: dict[str, float],
                  prefer: str | None = None) -> bool:
    """Whether Algorithm 2 must search beyond the reuse-only point: always for the least-memory
    goal or `prefer` memory; with a budget, when reuse alone does not fit it (the paper's
    early exit); without one, when a throughput target asks for the least memory meeting it
    (reuse alone is the fastest plan, never the smallest)."""
    if least_memory_goal(mem) or prefer == "memory":
        return True
    if mem is not None:
        return reuse.memory_bytes > mem
    return any(fps.values())


def meets(point: Point, mem: int | None, fps: dict[str, float]) -> bool:
    """True when the point fits M^c (None = no constraint, 0 = the least-memory goal, which
    every point meets) and every T^c_n (0 = none)."""
    if mem and point.memory_bytes > mem:
        return False
    return all(point.fps.get(cnn, 0.0) >= need for cnn, need in fps.items() if need)


def _key(indexed: tuple[int, Point]) -> tuple:
    i, p = indexed
    return (p.memory_bytes, -sum(p.fps.values()), i)


def _fastest(indexed: tuple[int, Point]) -> tuple:
    i, p = indexed
    return (-math.prod(p.fps.values()), p.memory_bytes, i)


def pick_rule(mem: int | None, fps: dict[str, float], prefer: str | None = None) -> str:
    """"memory" or "fps": the user's `prefer`, else "fps" when M^c is the only constraint."""
    if prefer is not None:
        if prefer not in PREFER:
            raise ValueError(f"prefer: expected one of {', '.join(PREFER)}, got {prefer!r}")
        return prefer
    return "fps" if mem and not any(fps.values()) else "memory"


def describe_rule(rule: str, prefer: str | None, mem: int | None = None) -> str:
    """One line for the summary and the report: which rule chose the plan, and why."""
    if least_memory_goal(mem) and prefer is None:
        return "the least memory meeting the throughput targets (the goal: memory 0)"
    what = ("the highest throughput meeting the constraints" if rule == "fps" else
            "the least memory meeting the constraints, the paper's rule")
    why = ("--prefer " + prefer if prefer is not None else
           "only a memory budget given; --prefer memory for the least memory" if rule == "fps"
           else "the default with a throughput constraint or none; --prefer fps for the fastest")
    return f"{what} ({why})"


def pick(front: list[Point], mem: int | None, fps: dict[str, float],
         prefer: str | None = None) -> tuple[Point, bool]:
    """The chosen point by `pick_rule`'s rule and whether it meets the constraints."""
    if not front:
        raise ValueError("empty Pareto front")
    ok = [(i, p) for i, p in enumerate(front) if meets(p, mem, fps)]
    if ok:
        return min(ok, key=_fastest if pick_rule(mem, fps, prefer) == "fps" else _key)[1], True
    return min(enumerate(front), key=_key)[1], False


def merge_fronts(*fronts: list[Point]) -> list[Point]:
    """The non-dominated points of several fronts (one per objective vector, the first
    met kept), sorted as algorithm2.points sorts the search's front."""
    def objectives(p: Point) -> tuple[float, ...]:
        return (-p.memory_bytes,) + tuple(p.fps[c] for c in sorted(p.fps))

    best: dict[tuple[float, ...], Point] = {}
    for p in (p for front in fronts for p in front):
        best.setdefault(objectives(p), p)
    keep = [p for v, p in best.items()
            if not any(all(a >= b for a, b in zip(w, v)) and w != v for w in best)]
    return sorted(keep, key=lambda p: (p.memory_bytes, -sum(p.fps.values()), p.genes))

"""Points of a Pareto front: merging fronts into one, and Algorithm 2, lines 9-16, choosing
one point of it.

The least-memory point that meets M^c and every T^c_n; when no point meets them all, the
least-memory point of the front (the paper still returns it, and `explore` exits 3).
Ties on memory go to the higher total fps, then to the earlier point (deterministic).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Point:
    """One evaluated chromosome: genes in gene order, memory in bytes, fps per CNN."""
    genes: tuple[int, ...]
    memory_bytes: int
    fps: dict[str, float] = field(default_factory=dict, hash=False, compare=False)


def meets(point: Point, mem: int | None, fps: dict[str, float]) -> bool:
    """True when the point fits M^c (None = no constraint) and every T^c_n (0 = none)."""
    if mem is not None and point.memory_bytes > mem:
        return False
    return all(point.fps.get(cnn, 0.0) >= need for cnn, need in fps.items() if need)


def _key(indexed: tuple[int, Point]) -> tuple:
    i, p = indexed
    return (p.memory_bytes, -sum(p.fps.values()), i)


def pick(front: list[Point], mem: int | None, fps: dict[str, float]) -> tuple[Point, bool]:
    """The chosen point and whether it meets the constraints (lines 9-16)."""
    if not front:
        raise ValueError("empty Pareto front")
    ok = [(i, p) for i, p in enumerate(front) if meets(p, mem, fps)]
    if ok:
        return min(ok, key=_key)[1], True
    return min(enumerate(front), key=_key)[1], False


def merge_fronts(*fronts: list[Point]) -> list[Point]:
    """The non-dominated points of several fronts (one per objective vector, the first
    met kept), sorted as algorithm2._points sorts the search's front."""
    def objectives(p: Point) -> tuple[float, ...]:
        return (-p.memory_bytes,) + tuple(p.fps[c] for c in sorted(p.fps))

    best: dict[tuple[float, ...], Point] = {}
    for p in (p for front in fronts for p in front):
        best.setdefault(objectives(p), p)
    keep = [p for v, p in best.items()
            if not any(all(a >= b for a, b in zip(w, v)) and w != v for w in best)]
    return sorted(keep, key=lambda p: (p.memory_bytes, -sum(p.fps.values()), p.genes))

"""Algorithm 2, lines 9-16: choose one point of the Pareto front.

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

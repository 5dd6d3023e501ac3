"""The one step every offset planner shares: put a record beside its already placed
neighbours, in the smallest gap that fits (best fit) or the lowest one (first fit)."""
from __future__ import annotations


def fit(size: int, placed: list[tuple[int, int]], best: bool) -> int:
    """Offset for a record of `size` among the placed neighbours' (offset, end) regions:
    the gap that fits with least slack when `best`, else the lowest; above them all when
    none fits."""
    return fits(size, placed)[0 if best else 1]


def fits(size: int, placed: list[tuple[int, int]]) -> tuple[int, int]:
    """(best fit, first fit) offsets of `fit`, from one scan."""
    at, choice, slack, first = 0, -1, None, -1
    for start, end in sorted(placed):
        gap = start - at
        if gap >= size:
            if first < 0:
                first = at
            if slack is None or gap - size < slack:
                choice, slack = at, gap - size
        if end > at:
            at = end
    return (choice, first) if choice >= 0 else (at, at)

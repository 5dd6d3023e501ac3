"""The one step every offset planner shares: put a record beside its already placed
neighbours, in the smallest gap that fits (best fit) or the lowest one (first fit)."""
from __future__ import annotations


def fit(size: int, placed: list[tuple[int, int]], best: bool) -> int:
    """Offset for a record of `size` among the placed neighbours' (offset, end) regions:
    the gap that fits with least slack when `best`, else the lowest; above them all when
    none fits."""
    placed = sorted(placed)
    at, choice, slack = 0, -1, None
    for start, end in placed:
        gap = start - at
        if gap >= size:
            if not best:
                return at
            if slack is None or gap - size < slack:
                choice, slack = at, gap - size
        if end > at:
            at = end
    return choice if choice >= 0 else at

"""The one step every offset planner shares: put a record beside its already placed
neighbours, in the smallest gap that fits (best fit) or the lowest one (first fit)."""
from __future__ import annotations


def _scan(size: int, placed: list[tuple[int, int]]) -> tuple[int, int | None, int, int]:
    """One pass over the gaps between the placed (offset, end) regions: (start of the gap
    that fits `size` with least slack or -1, that slack or None, start of the lowest gap
    that fits or -1, the top of every region)."""
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
    return choice, slack, first, at


def fits(size: int, placed: list[tuple[int, int]]) -> tuple[int, int]:
    """Offsets for a record of `size` among the placed neighbours' (offset, end) regions,
    from one scan: (the gap that fits with least slack, the lowest gap that fits); above
    them all when none fits."""
    choice, _, first, top = _scan(size, placed)
    return (choice, first) if choice >= 0 else (top, top)


def fits_below(size: int, placed: list[tuple[int, int]], limit: int) -> int:
    """Best fit under a ceiling `limit` (the live bound): the gap with least slack, where
    the space between the highest neighbour and `limit` counts as a gap whose record is put
    against the ceiling, not on the floor. A chain of growing tensors each alive with the
    next (DenseNet's concatenations) then alternates floor and ceiling instead of climbing;
    above every neighbour when nothing fits below the ceiling."""
    choice, slack, _, top = _scan(size, placed)
    if limit - top >= size and (slack is None or limit - top - size < slack):
        return limit - size
    return choice if choice >= 0 else top

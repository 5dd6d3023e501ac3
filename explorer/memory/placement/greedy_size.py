"""Greedy by size for offset calculation (Pisarchyk & Lee 2020, "Efficient memory
management for deep neural net inference", Section 4.3), the offset planner TensorFlow Lite
ships (GPU delegate `GreedyBySizeAssignment`; TFLite Micro's `GreedyMemoryPlanner` is the
same idea with first fit).

Records are taken largest first (ties: listed first); each goes into the smallest gap
between its already placed neighbours in the conflict graph that holds it, else above the
highest of them.
"""
from __future__ import annotations

import numpy as np

from explorer.memory.lifetimes import EdgeUse
from explorer.memory.buffers import Buffer
from explorer.memory.placement.conflicts import conflict_graph
from explorer.memory.placement.gaps import fits
from explorer.memory.placement.rows import Geometry, has_rows


def offsets(sizes: list[int], adj: list[set[int]], order: list[int], best: bool = True,
            geometry: Geometry | None = None) -> list[int]:
    """Offsets of records visited in `order` (every index once), best fit or first fit;
    `geometry` places uses with row-by-row lifetimes (explorer/memory/placement/rows.py), None
    plain rectangles."""
    return _offsets(sizes, adj, order, 0 if best else 1, geometry)[0]


def best_fit_offsets(sizes: list[int], adj: list[set[int]], order: list[int],
                     geometry: Geometry | None = None) -> tuple[list[int], bool]:
    """`offsets` with best fit, and whether every record's best gap was also its lowest
    one: then first fit in the same order gives the very same offsets (by induction over
    the records), and a caller trying both need not run it."""
    return _offsets(sizes, adj, order, 0, geometry)


def _offsets(sizes: list[int], adj: list[set[int]], order: list[int], which: int,
             geometry: Geometry | None) -> tuple[list[int], bool]:
    """The offsets taking fit `which` (0 best, 1 first) of each record, and whether the
    two fits agreed for every record."""
    off = [-1] * len(sizes)
    arr = np.full(len(sizes), -1, dtype=np.int64) if geometry is not None else None
    same = True
    for i in order:
        if geometry is not None:
            both = geometry.offsets(i, off, arr)
            arr[i] = both[which]
        else:
            both = fits(sizes[i], [(off[j], off[j] + sizes[j]) for j in adj[i] if off[j] >= 0])
        off[i] = both[which]
        same = same and both[0] == both[1]
    return off, same


def extent(sizes: list[int], off: list[int]) -> int:
    return max((o + s for o, s in zip(off, sizes)), default=0)


def buffers(uses: list[EdgeUse], off: list[int]) -> list[Buffer]:
    """One buffer per use, at its offset."""
    return [Buffer([u.name], u.size, o) for u, o in zip(uses, off)]


def place(uses: list[EdgeUse], pipelines: list[list[str]]) -> list[Buffer]:
    sizes = [u.size for u in uses]
    order = sorted(range(len(uses)), key=lambda i: -sizes[i])
    adj = conflict_graph(uses, pipelines)
    geometry = Geometry(uses, adj, pipelines) if has_rows(uses) else None
    return buffers(uses, offsets(sizes, adj, order, True, geometry))


class GreedyBySize:
    """TFLite's greedy by size for offsets, over tensor uses under reordered layers and
    schedules chosen for total memory."""
    name = "greedy-by-size"
    per_tensor = True
    at_offsets = True
    reorders = True

    def place(self, uses: list[EdgeUse], pipelines: list[list[str]]) -> list[Buffer]:
        return place(uses, pipelines)

"""Algorithm 1 of the paper (Section 5): greedy buffer reuse.

Visit the edge uses in the order `lifetimes.edge_uses` gives (partitions in application
order, then their edges by producer step, then consumer). For each use, a buffer is
suitable unless it holds a use that conflicts with it (`lifetimes.conflict`: a partition
running in parallel in the same set of J, or the same partition with an overlapping
interval of schedule steps). Among suitable buffers take the one whose growth
max(size - current, 0) is least, the first on ties; with none suitable open a new buffer.
Uses of partitions in different sets of J never conflict, so they may share.

The conflict test is incremental (per buffer: partitions held with their intervals, and
the sets of J touched) so that the search can call this thousands of times.
"""
from __future__ import annotations

from explorer.memory.lifetimes import EdgeUse, group_index
from explorer.memory.buffers import Buffer


def algorithm1(uses: list[EdgeUse], pipelines: list[list[str]]) -> list[Buffer]:
    """Buffers for `uses` (in the given order) by Algorithm 1; each buffer lists its uses'
    names in the order they were placed and has the size of its largest use."""
    group = group_index(pipelines)
    buffers: list[Buffer] = []
    held: list[dict[str, list[tuple[int, int]]]] = []   # buffer -> partition -> intervals
    touched: list[dict[object, set[str]]] = []          # buffer -> set of J -> partitions
    for use in uses:
        keys = [(p, a, b, group.get(p, ("alone", p))) for p, a, b in use.spans]
        best, best_growth = -1, None
        for k, buf in enumerate(buffers):
            parts, sets = held[k], touched[k]
            ok = True
            for p, a, b, g in keys:
                others = sets.get(g)
                if others and (len(others) > 1 or p not in others):
                    ok = False
                    break
                for c, d in parts.get(p, ()):
                    if a <= d and c <= b:
                        ok = False
                        break
                if not ok:
                    break
            if not ok:
                continue
            growth = use.size - buf.size if use.size > buf.size else 0
            if best_growth is None or growth < best_growth:
                best, best_growth = k, growth
                if growth == 0:
                    break          # nothing beats zero growth and earlier wins ties
        if best < 0:
            buffers.append(Buffer([], 0))
            held.append({})
            touched.append({})
            best = len(buffers) - 1
        buf = buffers[best]
        buf.edges.append(use.name)
        if use.size > buf.size:
            buf.size = use.size
        for p, a, b, g in keys:
            held[best].setdefault(p, []).append((a, b))
            touched[best].setdefault(g, set()).add(p)
    return buffers

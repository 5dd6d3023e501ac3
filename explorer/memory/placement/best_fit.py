"""Multi-order best fit: TFLite's greedy-by-size offset step (greedy_size.py) run under
several visiting orders, with best fit and with first fit, keeping the least arena.

Greedy-by-size alone is blind to time: two large records with short, disjoint lives are
placed as if they were as constrained as two long ones. The orders tried are the ones the
offset-assignment literature uses as priorities (Sekiyama et al. 2018, "Profile-guided memory
optimization for deep neural networks"; Pisarchyk & Lee 2020): size, size x lifetime (area),
lifetime, first step, and conflict weight (own size plus the sizes of every record it may not
share with); ties by size, then listed order. Deterministic.
"""
from __future__ import annotations

from typing import Iterator

from explorer.memory.lifetimes import EdgeUse
from explorer.memory.buffers import Buffer
from explorer.memory.placement.conflicts import conflict_graph, live_bound
from explorer.memory.placement.gaps import fits_below
from explorer.memory.placement.greedy_size import best_fit_offsets, buffers, extent, offsets
from explorer.memory.placement.rows import Geometry, has_rows


def orders(uses: list[EdgeUse], adj: list[set[int]]) -> Iterator[list[int]]:
    """The visiting orders, made one at a time (the search often stops after the first)."""
    sizes = [u.size for u in uses]
    idx = range(len(uses))
    yield sorted(idx, key=lambda i: -sizes[i])
    life = [sum(b - a + 1 for _, a, b in u.spans) for u in uses]
    yield sorted(idx, key=lambda i: (-sizes[i] * life[i], -sizes[i]))
    yield sorted(idx, key=lambda i: (-life[i], -sizes[i]))
    start = [min(a for _, a, _ in u.spans) for u in uses]
    yield sorted(idx, key=lambda i: (start[i], -sizes[i]))
    weight = [sizes[i] + sum(sizes[j] for j in adj[i]) for i in range(len(uses))]
    yield sorted(idx, key=lambda i: (-weight[i], -sizes[i]))


def best_offsets(uses: list[EdgeUse], adj: list[set[int]],
                 pipelines: list[list[str]] | None = None) -> list[int]:
    """The least-arena offsets over every order and both fits (first found wins ties);
    stops as soon as one reaches the live bound (no placement does better, and a later
    one would have to be strictly better to win). Uses with row-by-row lifetimes are placed
    by explorer/memory/placement/rows.py (`pipelines` then say which partitions run in parallel)."""
    sizes = [u.size for u in uses]
    geometry = Geometry(uses, adj, pipelines or []) if has_rows(uses) else None
    floor = live_bound(uses, adj)
    best, best_end = None, None
    tried: list[list[int]] = []
    for order in orders(uses, adj):
        tried.append(order)
        for off in _both_fits(sizes, adj, order, geometry):
            end = extent(sizes, off)
            if best_end is None or end < best_end:
                best, best_end = off, end
            if best_end <= floor:
                return best
    if geometry is None:                 # plain rectangles: each order against the ceiling
        for order in tried:
            off = ceiling_offsets(sizes, adj, order, floor)
            end = extent(sizes, off)
            if end < best_end:
                best, best_end = off, end
            if best_end <= floor:
                return best
    return best or []


def ceiling_offsets(sizes: list[int], adj: list[set[int]], order: list[int], limit: int
                    ) -> list[int]:
    """Offsets of records visited in `order`, each by gaps.fits_below under `limit`."""
    off = [-1] * len(sizes)
    for i in order:
        off[i] = fits_below(sizes[i], [(off[j], off[j] + sizes[j]) for j in adj[i] if off[j] >= 0],
                            limit)
    return off


def _both_fits(sizes: list[int], adj: list[set[int]], order: list[int],
               geometry: Geometry | None) -> Iterator[list[int]]:
    """Best fit's offsets in `order`, then first fit's unless they would be the same."""
    off, same = best_fit_offsets(sizes, adj, order, geometry)
    yield off
    if not same:
        yield offsets(sizes, adj, order, False, geometry)


def place(uses: list[EdgeUse], pipelines: list[list[str]]) -> list[Buffer]:
    return buffers(uses, best_offsets(uses, conflict_graph(uses, pipelines), pipelines))


class BestFit:
    """Multi-order best fit: offsets in one arena, over tensor uses under reordered layers and
    schedules chosen for total memory (the default)."""
    name = "offsets"
    per_tensor = True
    at_offsets = True
    reorders = True

    def place(self, uses: list[EdgeUse], pipelines: list[list[str]]) -> list[Buffer]:
        return place(uses, pipelines)

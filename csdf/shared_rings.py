"""One ring per tensor: the rows a tensor produced by parts keeps when several layers read it
(docs/memory.md, "One buffer per tensor").

csdf.partition_analysis sizes every edge's ring for its one reader (`edge_occupancy`).
When the readers share one ring, row r (slot r % S) is freed only once every reader is done
with it, so the ring holds, at the start of each producer firing that writes rows b..e-1,
every row from the lowest one some reader still needs: e - min(b, min over readers of the
lowest row that reader reads at or after that step). The slowest reader sets it. The most
over firings, rounded up to whole producer parts (`ring_rows`), is the ring; a whole
producer or any whole reader needs every row. Each reader then satisfies the single-reader
condition against the shared size (no row r + S written before that reader's last read of
row r), which deploy/checks/plan_check.py replays row by row for every edge.

The CSDF graph keeps one channel per (producer, consumer) pair for analysis; only the
memory each channel's tokens occupy is shared (docs/memory.md).
"""
from __future__ import annotations

from bisect import bisect_left

from csdf.analysis_cache import AnalysisCache
from csdf.partition_analysis import first_reads, ring_rows
from sdf3.graph import Graph

Edge = tuple[str, str]


def tensor_occupancy(prod: list[int], prod_steps: list[int],
                     readers: list[tuple[list[range], list[int]]], height: int,
                     cache: AnalysisCache | None = None) -> int:
    """Most rows of one tensor held at once by a ring shared by `readers` ((windows, steps)
    of each, as `edge_occupancy` takes one): module doc. `cache` keeps the first-read tables."""
    if len(prod) == 1 or any(len(steps) == 1 for _, steps in readers):
        return height
    lows = [(first_reads(windows, height, cache), steps) for windows, steps in readers]
    best = begin = 0
    for n, step in zip(prod, prod_steps):
        end = begin + n
        first = begin
        for low, steps in lows:
            p = bisect_left(steps, step)
            f = low[p] if p < len(steps) else height
            if f < first:
                first = f
        if end - first > best:
            best = end - first
        begin = end
    return best


def share_rings(graph: Graph, windows: dict[Edge, list[range]], firings: list[str],
                rows: dict[Edge, int], whole: frozenset[str] | set[str] = frozenset(),
                cache: AnalysisCache | None = None) -> dict[Edge, int]:
    """`rows` (per edge, csdf.partition_analysis.row_buffers) with every edge of a tensor
    read by several layers given the tensor's one ring; tensors of `whole` (producers also
    read outside the partition, where a crossing edge holds them whole) keep every row."""
    out = dict(rows)
    by_src: dict[str, list] = {}
    for ch in graph.channels:
        if ch.src != ch.dst:
            by_src.setdefault(ch.src, []).append(ch)
    steps: dict[str, list[int]] | None = None
    for src, chans in by_src.items():
        if len(chans) < 2 and src not in whole:
            continue
        height = sum(chans[0].prod)
        if src in whole:
            ring = height
        else:
            if steps is None:
                steps = {name: [] for name in graph.actors}
                for t, name in enumerate(firings):
                    steps[name].append(t)
            held = tensor_occupancy(chans[0].prod, steps[src],
                                    [(windows[(src, ch.dst)], steps[ch.dst]) for ch in chans],
                                    height, cache)
            ring = ring_rows(held, chans[0].prod[0], height)
        for ch in chans:
            out[(src, ch.dst)] = ring
    return out

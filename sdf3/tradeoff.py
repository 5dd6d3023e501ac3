"""Storage/throughput trade-off points, as SDF3's `buffersize` algorithm reports them.

Exhaustive: for each total storage (tokens, all channels counted, self-loops included) from
the smallest conceivable upward, the best throughput over every distribution of that total;
a point is kept when it beats every smaller total. It stops at the graph's throughput
without storage limits. Exponential in the number of channels, like SDF3's own search: it is
for cross-checking small graphs, not for CNN partitions (use sdf3.schedule there).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product

from sdf3.graph import Graph
from sdf3.throughput import throughput


@dataclass
class TradeoffPoint:
    throughput: float
    size: int                                   # total tokens over all channels
    distributions: list[dict[str, int]] = field(default_factory=list)


def lower_bound(graph: Graph, channel) -> int:
    """No capacity below this can run: the initial tokens, a full production, a full consumption."""
    return max([channel.initial_tokens, *channel.prod, *channel.cons])


def _compositions(extra: int, slots: int):
    """All ways to share `extra` among `slots` channels, in a fixed order."""
    if slots == 0:
        if extra == 0:
            yield ()
        return
    for first in range(extra, -1, -1):
        for rest in _compositions(extra - first, slots - 1):
            yield (first, *rest)


def tradeoff(graph: Graph, max_size: int | None = None) -> list[TradeoffPoint]:
    """Pareto points (throughput, total size) with the distributions that reach them.

    The first point is SDF3's (0, 0): no storage, no throughput."""
    chans = graph.channels
    lbs = [lower_bound(graph, c) for c in chans]
    # a self-loop limits auto-concurrency; SDF3 sizes it as one claim on top of its tokens
    fixed = {i: c.initial_tokens + max(c.prod) for i, c in enumerate(chans) if c.src == c.dst}
    free = [i for i in range(len(chans)) if i not in fixed]
    top = throughput(graph)
    base = sum(fixed.values()) + sum(lbs[i] for i in free)
    limit = max_size if max_size is not None else base + 8 * max(1, len(free)) * max(lbs or [1])
    points = [TradeoffPoint(0.0, 0, [{c.name: 0 for c in chans}])]
    best = 0.0
    for size in range(base, limit + 1):
        found: list[dict[str, int]] = []
        level = best
        for extra in _compositions(size - base, len(free)):
            dist = {c.name: fixed.get(i, 0) for i, c in enumerate(chans)}
            for i, e in zip(free, extra):
                dist[chans[i].name] = lbs[i] + e
            thr = throughput(graph, dist)
            if thr > level + 1e-12:
                level, found = thr, [dist]
            elif found and abs(thr - level) <= 1e-12:
                found.append(dist)
        if found:
            best = level
            points.append(TradeoffPoint(level, size, found))
            if math.isclose(best, top) or best >= top:
                break
    return points

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


def sdf3_min_size(channel) -> int:
    """SDF3's per-channel starting size (CSDFstateSpaceBufferAnalysis::initMinimalChannelSz):
    the smallest, over the first gcd(#src phases, #dst phases) phase pairs (p, c), of the SDF
    bound p + c - gcd(p, c) + t mod gcd(p, c) (at least t), or p + max(c, t) on a self-loop.
    Not a true lower bound for CSDF (a phase with c = 0 gives 0); SDF3 starts its search
    from these sizes and never looks below them."""
    t = channel.initial_tokens
    best = None
    for i in range(math.gcd(len(channel.prod), len(channel.cons))):
        p, c = channel.prod[i], channel.cons[i]
        if channel.src == channel.dst:
            lb = p + max(c, t)
        else:
            g = math.gcd(p, c)
            lb = max(p + c - g + (t % g if g else 0), t)
        best = lb if best is None else min(best, lb)
    return best or 0


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

    SDF3's rule for the first point: its search starts from the distribution of
    `sdf3_min_size` per channel; when that distribution deadlocks, SDF3 reports (0, 0) with
    every channel 0 as the first point, otherwise it does not."""
    chans = graph.channels
    sdf3_min = [sdf3_min_size(c) for c in chans]
    # SDF3 never enlarges a self-loop (it limits auto-concurrency) nor looks below its start
    lbs = [max(lower_bound(graph, c), m) for c, m in zip(chans, sdf3_min)]
    fixed = {i: sdf3_min[i] for i, c in enumerate(chans) if c.src == c.dst}
    free = [i for i in range(len(chans)) if i not in fixed]
    top = throughput(graph)
    base = sum(fixed.values()) + sum(lbs[i] for i in free)
    limit = max_size if max_size is not None else base + 8 * max(1, len(free)) * max(lbs or [1])
    points = []
    if throughput(graph, {c.name: m for c, m in zip(chans, sdf3_min)}) == 0:
        points.append(TradeoffPoint(0.0, 0, [{c.name: 0 for c in chans}]))
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

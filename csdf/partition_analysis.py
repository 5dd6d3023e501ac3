"""Analysis of one CNN partition with phases per layer: its CSDF graph, a schedule that keeps
buffers small, and the real size of every internal edge's row buffer.

The schedule is demand-driven (`demand_schedule`): among the layers that can fire, one whose
consumer is starved of its rows (or a sink) goes first, latest in topological order first;
a producer runs ahead only when nothing downstream can. This is the policy of sdf3's
`min_buffer_schedule`, kept here so that the CNN side does not depend on heuristics tuned to
CSDF token counts, which undercount sliding windows (see docs/parts.md). With one phase per
layer the schedule is the partition's topological order (`CNN.order()`), as the
architecture fixes. Results are cached per CNN by (layers, phases).

Real buffer sizes (what a deployment with circular row buffers needs) come from replaying
the schedule row by row; see `edge_occupancy` and docs/parts.md.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from itertools import accumulate

from csdf.model import CNN
from csdf.to_csdf import edge_windows, to_csdf
from sdf3.errors import InputError
from sdf3.graph import Graph
from sdf3.notation import compact
from sdf3.schedule import run_schedule

Edge = tuple[str, str]


@dataclass
class PartitionAnalysis:
    """Results for one partition; treat as read-only (results are cached per CNN)."""

    layers: list[str]                           # the partition, topological order
    phases: dict[str, int]                      # every layer of the partition
    graph: Graph                                # the CSDF graph (no self-loops)
    firings: list[str]                          # flat schedule: the layer of every firing
    phase_of_firing: list[int]                  # its phase (0-based)
    firing_counts: dict[str, int]
    edge_rows: dict[Edge, int]                  # internal edges: rows the buffer holds at most
    edge_elements: dict[Edge, int]              # rows * N * C * W
    edge_steps: dict[Edge, tuple[int, int]]     # first and last step the edge holds data
    schedule: str = ""                          # compact, paper notation
    # most tokens each channel holds under SDF3's rules (consumed tokens leave at firing
    # end): fewer than the real rows when windows overlap, as a window keeps rows it consumed
    csdf_tokens: dict[Edge, int] = field(default_factory=dict)

    @property
    def buffer_elements(self) -> int:
        return sum(self.edge_elements.values())


def edge_occupancy(prod_steps: list[int], windows: list[range], cons_steps: list[int],
                   height: int) -> tuple[int, int, int]:
    """Largest number of rows of one edge held at once, and the first and last step it holds
    any. Row r is claimed when the producer firing that writes it starts; it is freed at the
    end of the consumer phase after which neither it nor any earlier row is read again (rows
    leave a circular buffer in order). `prod_steps` has one step per row (a whole producer
    repeats its one step, a part of k rows its step k times); `windows[p]` are the rows
    consumer phase p reads."""
    last = [-1] * height
    for step, rows in zip(cons_steps, windows):
        for r in rows:
            last[r] = step
    free = [max(t, f) for t, f in zip(prod_steps, accumulate(last, max))]
    best = 0
    for r in range(height):
        if r + 1 < height and prod_steps[r + 1] == prod_steps[r]:
            continue
        best = max(best, r + 1 - bisect_left(free, prod_steps[r]))
    return best, prod_steps[0], free[-1]


def ring_rows(held: int, part: int, height: int) -> int:
    """Rows of a ring that holds `held` rows at most, written `part` rows at a time: a
    multiple of `part` (at most the height), so that every part lands in consecutive slots
    and a part model writes it in place (docs/parts.md). Row by row: `held`."""
    if part <= 1 or held >= height:
        return held
    return min(height, -(-held // part) * part)


def row_buffers(graph: Graph, windows: dict[Edge, list[range]], firings: list[str]
                ) -> tuple[dict[Edge, int], dict[Edge, tuple[int, int]]]:
    """Rows each internal edge's ring needs under the schedule `firings` (any valid one):
    the most it holds at once (`edge_occupancy`), rounded up to whole parts of its producer
    (`ring_rows`); and the first and last step it holds any."""
    at: dict[str, list[int]] = {name: [] for name in graph.actors}
    for step, name in enumerate(firings):
        at[name].append(step)
    rows: dict[Edge, int] = {}
    spans: dict[Edge, tuple[int, int]] = {}
    for ch in graph.channels:
        if ch.src == ch.dst:
            continue
        edge = (ch.src, ch.dst)
        height = sum(ch.prod)
        prod_steps = [step for step, n in zip(at[ch.src], ch.prod) for _ in range(n)]
        held, first, last = edge_occupancy(prod_steps, windows[edge], at[ch.dst], height)
        rows[edge], spans[edge] = ring_rows(held, ch.prod[0], height), (first, last)
    return rows, spans


def demand_schedule(graph: Graph, order: list[str]) -> list[str]:
    """One iteration of an acyclic CSDF graph (each actor through its phases once), one
    firing at a time: the ready actor with a starved consumer (or none) latest in `order`
    first, else the ready actor latest in `order`. Event-driven: after a firing only the
    actor and its neighbours are looked at again. Returns the actor of every step."""
    index = {name: i for i, name in enumerate(order)}
    n = len(order)
    phases = [graph.actors[name].phases for name in order]
    tok: list[int] = []
    ins: list[list[tuple[int, list[int]]]] = [[] for _ in order]
    outs: list[list[tuple[int, list[int], list[int], int]]] = [[] for _ in order]
    near: list[set[int]] = [{a} for a in range(n)]
    for ch in graph.channels:
        if ch.src == ch.dst:
            continue
        k, s, d = len(tok), index[ch.src], index[ch.dst]
        tok.append(ch.initial_tokens)
        ins[d].append((k, ch.cons))
        outs[s].append((k, ch.prod, ch.cons, d))
        near[s].add(d)
        near[d].add(s)
    nxt = [0] * n

    def ready(a: int) -> bool:
        p = nxt[a]
        return p < phases[a] and all(tok[k] >= cons[p] for k, cons in ins[a])

    def key(a: int) -> tuple[int, int]:
        starved = not outs[a] or any(nxt[d] < phases[d] and tok[k] < cons[nxt[d]]
                                     for k, _, cons, d in outs[a])
        return (0 if starved else 1, -a)

    heap = [key(a) for a in range(n) if ready(a)]
    heapq.heapify(heap)
    firings: list[str] = []
    while heap:
        entry = heapq.heappop(heap)
        a = -entry[1]
        if not ready(a):
            continue
        now = key(a)
        if now != entry:          # stale: its consumers' needs changed since it was queued
            heapq.heappush(heap, now)
            continue
        p = nxt[a]
        firings.append(order[a])
        for k, prod, _, _ in outs[a]:
            tok[k] += prod[p]
        for k, cons in ins[a]:
            tok[k] -= cons[p]
        nxt[a] = p + 1
        for b in near[a]:
            if ready(b):
                heapq.heappush(heap, key(b))
    stuck = [a for a in range(n) if nxt[a] < phases[a]]
    if stuck:
        raise InputError(f"graph {graph.name}: deadlock, layer {order[stuck[0]]} cannot finish "
                         f"its {phases[stuck[0]]} phases")
    return firings


def phase_numbers(firings: list[str]) -> list[int]:
    """The phase of every firing: how many times its layer fired before."""
    seen: Counter[str] = Counter()
    out = []
    for name in firings:
        out.append(seen[name])
        seen[name] += 1
    return out


def analyse_partition(cnn: CNN, layers: list[str], phases: dict[str, int]) -> PartitionAnalysis:
    """CSDF graph, schedule and real row-buffer sizes of the partition `layers` of `cnn`
    (any order; a missing phase count means 1). Cached per CNN by (layers, phases)."""
    cache = cnn.graph.graph.setdefault("_partition_analysis", {})
    key = (tuple(layers), tuple(int(phases.get(name, 1)) for name in layers))
    if key in cache:
        return cache[key]
    unknown = [name for name in layers if name not in cnn.graph]
    if unknown:
        raise InputError(f"CNN {cnn.name}: partition names unknown layer {unknown[0]!r}")
    inside = set(layers)
    order = [name for name in cnn.order() if name in inside]
    ph = {name: int(phases.get(name, 1)) for name in order}
    windows = edge_windows(cnn, order, ph)
    graph = to_csdf(cnn, order, ph, windows=windows)
    if all(n == 1 for n in ph.values()):   # whole layers: the partition's topological order
        firings = list(order)
    else:
        firings = demand_schedule(graph, order)
    rows, spans = row_buffers(graph, windows, firings)
    tokens = run_schedule(graph, firings)
    counts = Counter(firings)
    result = PartitionAnalysis(
        layers=order, phases=ph, graph=graph, firings=firings,
        phase_of_firing=phase_numbers(firings),
        firing_counts={name: counts[name] for name in order},
        edge_rows=rows,
        edge_elements={(ch.src, ch.dst): rows[(ch.src, ch.dst)] * ch.token_size
                       for ch in graph.channels},
        edge_steps=spans, schedule=compact(firings),
        csdf_tokens={(ch.src, ch.dst): tokens[ch.name] for ch in graph.channels})
    cache[key] = result
    return result

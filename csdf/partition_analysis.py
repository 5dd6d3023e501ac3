"""Analysis of one CNN partition with phases per layer: its CSDF graph, a schedule that keeps
buffers small, and the real size of every internal edge's row buffer.

The schedule is demand-driven (`demand_schedule`): among the layers that can fire, one whose
consumer is starved of its rows (or a sink) goes first, latest in topological order first;
a producer runs ahead only when nothing downstream can. This is sdf3's `min_buffer_schedule`
without its first class (firings that raise no channel above the fill it reached), which is
tuned to CSDF token counts, and these undercount sliding windows (see docs/parts.md). With one phase per
layer the schedule is the partition's topological order (`CNN.order()`), as the
architecture fixes. Given a csdf.analysis_cache.AnalysisCache, results are kept per CNN by
(layers, phases).

Real buffer sizes (what a deployment with circular row buffers needs) come from the rows
each edge holds under the schedule, counted at every producer firing; see `edge_occupancy`
and docs/parts.md.
"""
from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property

from csdf.analysis_cache import AnalysisCache
from csdf.model import CNN
from csdf.to_csdf import edge_windows, to_csdf
from sdf3.analysis import Deadlock
from sdf3.errors import InputError
from sdf3.graph import Graph
from sdf3.notation import compact
from sdf3.schedule import demand_schedule as sdf3_demand_schedule, run_schedule

Edge = tuple[str, str]


@dataclass
class PartitionAnalysis:
    """Results for one partition; treat as read-only (an AnalysisCache hands it out again)."""

    layers: list[str]                           # the partition, topological order
    phases: dict[str, int]                      # every layer of the partition
    graph: Graph                                # the CSDF graph (no self-loops)
    firings: list[str]                          # flat schedule: the layer of every firing
    phase_of_firing: list[int]                  # its phase (0-based)
    firing_counts: dict[str, int]
    edge_rows: dict[Edge, int]                  # internal edges: rows the buffer holds at most
    edge_elements: dict[Edge, int]              # rows * N * C * W
    edge_steps: dict[Edge, tuple[int, int]]     # first and last step the edge holds data
    windows: dict[Edge, list[range]] = field(default_factory=dict)   # csdf.to_csdf.edge_windows

    @property
    def buffer_elements(self) -> int:
        return sum(self.edge_elements.values())

    @cached_property
    def schedule(self) -> str:
        """The schedule in the paper's compact notation (made when asked: the search never
        reads it)."""
        return compact(self.firings)

    @cached_property
    def csdf_tokens(self) -> dict[Edge, int]:
        """Most tokens each channel holds under SDF3's rules (consumed tokens leave at
        firing end): fewer than the real rows when windows overlap, as a window keeps rows
        it consumed. Replayed when asked (sdf3.schedule.run_schedule)."""
        tokens = run_schedule(self.graph, self.firings)
        return {(ch.src, ch.dst): tokens[ch.name] for ch in self.graph.channels}


def first_reads(windows: list[range], height: int, cache: AnalysisCache | None = None
                ) -> list[int]:
    """For each consumer phase p, the lowest row any phase >= p reads (`height` if none):
    kept in `cache` per windows list (edge_windows hands out one per edge and phase count)."""
    kept = None if cache is None else cache.first_reads
    hit = None if kept is None else kept.get(id(windows))
    if hit is None or hit[0] is not windows:
        low, out = height, [height] * len(windows)
        for p in range(len(windows) - 1, -1, -1):
            rows = windows[p]
            if rows and rows[0] < low:
                low = rows[0]
            out[p] = low
        if kept is None:
            return out
        if len(kept) > cache.FIRST_READS:
            kept.clear()
        hit = kept[id(windows)] = (windows, out)
    return hit[1]


def edge_occupancy(prod: list[int], prod_steps: list[int], windows: list[range],
                   cons_steps: list[int], height: int, cache: AnalysisCache | None = None
                   ) -> tuple[int, int, int]:
    """Largest number of rows of one edge held at once, and the first and last step it holds
    any. Row r is claimed when the producer firing that writes it starts; it is freed at the
    end of the consumer phase after which neither it nor any earlier row is read again (rows
    leave a circular buffer in order). Producer firing i writes `prod[i]` rows at step
    `prod_steps[i]`; `windows[p]` are the rows consumer phase p reads, at `cons_steps[p]`
    (increasing).

    The most is reached when a producer firing starts: firing i (rows b..e-1, step s) then
    holds every row from the first one not yet freed. Rows below b were written earlier, so
    a row r < b is still held iff some consumer phase at step >= s reads a row <= r: the
    first held row is min(b, lowest row read by a phase at or after s), the latter one
    bisection into the consumer steps (`first_reads`). tests/explorer/search/test_search_speed.py checks
    this against a replay of every row."""
    if len(prod) == 1 or len(cons_steps) == 1:
        # a whole producer or a whole consumer (one phase, all rows) holds the whole tensor
        end = next((t for t, rows in zip(reversed(cons_steps), reversed(windows)) if rows), -1)
        return height, prod_steps[0], max(prod_steps[-1], end)
    low = first_reads(windows, height, cache)
    n_cons = len(cons_steps)
    best = begin = 0
    for n, step in zip(prod, prod_steps):
        end = begin + n
        p = bisect_left(cons_steps, step)
        first = low[p] if p < n_cons else height
        held = end - (first if first < begin else begin)
        if held > best:
            best = held
        begin = end
    end = next((t for t, rows in zip(reversed(cons_steps), reversed(windows)) if rows), -1)
    return best, prod_steps[0], max(prod_steps[-1], end)


def ring_rows(held: int, part: int, height: int) -> int:
    """Rows of a ring that holds `held` rows at most, written `part` rows at a time: a
    multiple of `part` (at most the height), so that every part lands in consecutive slots
    and a part model writes it in place (docs/parts.md). Row by row: `held`."""
    if part <= 1 or held >= height:
        return held
    return min(height, -(-held // part) * part)


def row_buffers(graph: Graph, windows: dict[Edge, list[range]], firings: list[str],
                cache: AnalysisCache | None = None
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
        held, first, last = edge_occupancy(ch.prod, at[ch.src], windows[edge], at[ch.dst],
                                           height, cache)
        rows[edge], spans[edge] = ring_rows(held, ch.prod[0], height), (first, last)
    return rows, spans


def demand_schedule(graph: Graph, order: list[str]) -> list[str]:
    """One iteration of an acyclic CSDF graph (each actor through its phases once), one
    firing at a time: the ready actor with a starved consumer (or none) latest in `order`
    first, else the ready actor latest in `order` (sdf3.schedule.demand_schedule). Returns
    the actor of every step; a graph that cannot finish is one line naming the layer."""
    try:
        return sdf3_demand_schedule(graph, order)
    except Deadlock as err:
        raise InputError(f"graph {graph.name}: deadlock, layer {err.actor} cannot finish "
                         f"its {graph.actors[err.actor].phases} phases") from None


def phase_numbers(firings: list[str]) -> list[int]:
    """The phase of every firing: how many times its layer fired before."""
    seen: Counter[str] = Counter()
    out = []
    for name in firings:
        out.append(seen[name])
        seen[name] += 1
    return out


def analyse_partition(cnn: CNN, layers: list[str], phases: dict[str, int],
                      cache: AnalysisCache | None = None) -> PartitionAnalysis:
    """CSDF graph, schedule and real row-buffer sizes of the partition `layers` of `cnn`
    (any order; a missing phase count means 1). `cache` keeps them per CNN by (layers,
    phases), and the windows and rates they are made of."""
    kept = None if cache is None else cache.of(cnn).analyses
    key = (tuple(layers), tuple(int(phases.get(name, 1)) for name in layers))
    if kept is not None and key in kept:
        return kept.get(key)
    unknown = [name for name in layers if name not in cnn.graph]
    if unknown:
        raise InputError(f"CNN {cnn.name}: partition names unknown layer {unknown[0]!r}")
    inside = set(layers)
    order = [name for name in cnn.order() if name in inside]
    ph = {name: int(phases.get(name, 1)) for name in order}
    windows = edge_windows(cnn, order, ph, cache)
    graph = to_csdf(cnn, order, ph, windows=windows, cache=cache)
    if all(n == 1 for n in ph.values()):   # whole layers: the partition's topological order
        firings = list(order)
    else:
        firings = demand_schedule(graph, order)
    rows, spans = row_buffers(graph, windows, firings, cache)
    counts = Counter(firings)
    result = PartitionAnalysis(
        layers=order, phases=ph, graph=graph, firings=firings,
        phase_of_firing=phase_numbers(firings),
        firing_counts={name: counts[name] for name in order},
        edge_rows=rows,
        edge_elements={(ch.src, ch.dst): rows[(ch.src, ch.dst)] * ch.token_size
                       for ch in graph.channels},
        edge_steps=spans, windows=windows)
    if kept is not None:
        kept.put(key, result)
    return result

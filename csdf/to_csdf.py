"""A CNN partition with phases per layer, as a CSDF graph (`sdf3.Graph`).

One actor per layer (named by the layer), one channel per edge internal to the partition
(named "SRC->DST"). A token is one row of the edge's tensor: N x C x W elements. A layer in
one phase produces and consumes whole tensors in its one firing; a layer by parts produces
k = ceil(H / Φ) rows per phase (the last phase the rest) and consumes, per phase, the input rows its window newly reaches (rows it
never reads are consumed by its last phase, which CSDF's balance equations require).
Edges from outside the partition are not modelled: the caller holds them whole, so the
layer reading them is never blocked by them.
"""
from __future__ import annotations

from itertools import accumulate

from csdf.analysis_cache import AnalysisCache, CNNAnalyses
from csdf.model import CNN
from csdf.parts import check_phases, phase_windows, rows_per_phase
from sdf3.graph import Actor, Channel, Graph


def token_size(cnn: CNN, src: str, dst: str) -> int:
    """Elements in one row of the edge's tensor, the whole batch: N * C * W."""
    n, c, _, w = cnn.edge_shape(src, dst)
    return int(n * c * w)


def consumption_rates(windows: list[range], height: int) -> list[int]:
    """Rows newly reached per phase (the CSDF rates); the last phase takes the rest."""
    reach = list(accumulate((w[-1] + 1 if w else 0 for w in windows), max))
    rates = [b - a for a, b in zip([0] + reach[:-1], reach)]
    rates[-1] += height - reach[-1]
    return rates


def production_rates(height: int, phases: int) -> list[int]:
    """Rows written per phase: k = ceil(H / Φ) each, the last phase the rest."""
    k = rows_per_phase(height, phases)
    return [k] * (phases - 1) + [height - k * (phases - 1)]


def internal_edges(cnn: CNN, layers: list[str]) -> list[tuple[str, str]]:
    """Edges with both ends in the partition, in the CNN's stable edge order."""
    inside = set(layers)
    return [(u, v) for u, v in cnn.edges() if u in inside and v in inside]


def edge_windows(cnn: CNN, layers: list[str], phases: dict[str, int],
                 cache: AnalysisCache | None = None) -> dict[tuple[str, str], list[range]]:
    """Per internal edge, the rows of it each phase of its consumer reads. With a `cache`
    one list is handed out per edge, phase count and shapes (the search asks for the same
    windows thousands of times; treat the lists as read-only)."""
    kept = None if cache is None else cache.of(cnn).windows
    out = {}
    for src, dst in internal_edges(cnn, layers):
        n = phases.get(dst, 1)
        if kept is None:
            out[(src, dst)] = phase_windows(cnn, dst, src, n)
            continue
        key = (src, dst, n, tuple(cnn.edge_shape(src, dst)), tuple(cnn.layer(dst).output_shape))
        reads = kept.get(key)
        if reads is None:
            reads = kept[key] = phase_windows(cnn, dst, src, n)
        out[(src, dst)] = reads
    return out


def channel_rates(cnn: CNN, src: str, dst: str, n_src: int, reads: list[range],
                  kept: CNNAnalyses | None = None) -> tuple[list[int], list[int], int]:
    """Production and consumption rates and token size of one edge. The search builds the
    same channels thousands of times, so `kept` (AnalysisCache.of(cnn)) holds them per edge
    and producer phase count for this very `reads` list (edge_windows hands out one list
    per edge and consumer phase count; the entry holds the list, so its identity cannot be
    reused)."""
    if kept is None:
        height = int(cnn.edge_shape(src, dst)[2])
        return production_rates(height, n_src), consumption_rates(reads, height), \
            token_size(cnn, src, dst)
    rates = kept.rates
    key = (src, dst, n_src, len(reads))
    hit = rates.get(key)
    if hit is None or hit[0] is not reads:
        height = int(cnn.edge_shape(src, dst)[2])
        hit = rates[key] = (reads, production_rates(height, n_src),
                            consumption_rates(reads, height), token_size(cnn, src, dst))
    return hit[1], hit[2], hit[3]


def to_csdf(cnn: CNN, layers: list[str], phases: dict[str, int], name: str | None = None,
            self_loops: bool = False,
            windows: dict[tuple[str, str], list[range]] | None = None,
            cache: AnalysisCache | None = None) -> Graph:
    """The CSDF graph of a partition. `self_loops` adds to each actor a channel "L->L"
    holding one token, which tells SDF3 a layer runs its phases one after another (SDF3
    otherwise allows unbounded auto-concurrency); our own analyses do not need it.
    `windows`: edge_windows of the partition when the caller has them; `cache` reuses
    windows and rates already worked out."""
    graph = Graph(name or cnn.name)
    for layer in layers:
        n = phases.get(layer, 1)
        check_phases(cnn, layer, n)
        graph.add_actor(Actor(layer, n, [1] * n, type=cnn.layer(layer).op))
    if windows is None:
        windows = edge_windows(cnn, layers, phases, cache)
    kept = None if cache is None else cache.of(cnn)
    for (src, dst), reads in windows.items():
        prod, cons, size = channel_rates(cnn, src, dst, phases.get(src, 1), reads, kept)
        graph.add_channel(Channel(
            f"{src}->{dst}", src, dst, prod=list(prod), cons=list(cons), token_size=size,
            src_port=f"out_{dst}", dst_port=f"in_{src}"))
    if self_loops:
        add_self_loops(graph)
    return graph


def add_self_loops(graph: Graph) -> None:
    """A channel "L->L" with one initial token on every actor: no actor fires two phases at once."""
    for actor in graph.actors.values():
        one = [1] * actor.phases
        graph.add_channel(Channel(f"{actor.name}->{actor.name}", actor.name, actor.name,
                                  prod=one, cons=list(one), initial_tokens=1,
                                  src_port="out_self", dst_port="in_self"))

"""By-parts regions: which layers' phases interleave, the weights they cycle through, and
the whole layers beside them.

Processing by parts (Minakova & Stefanov, TODAES 2022, Section 4.2, Equation 6) runs a
layer in Φ phases, and a demand-driven schedule (csdf/schedule_policies.py) interleaves the
phases of connected by-parts layers: each output row of the last asks one row of every layer
before it, up to the nearest whole layer, which runs once and so ends the cycle. Between
two phases of a layer the CPU therefore touches the weights of every layer of its region,
and once they outgrow the caches each phase re-reads its own weights from memory.

Measured (ResNet-50, one thread, blocked layout): a layer1/layer2 convolution
row by row took 0.76-0.93x its time in the profile's ladder deployment (every layer in
parts, so its region held 23.5 M of ResNet-50's 25.5 M parameters) when its plan's region
held conv1-layer2 only (1.13 M), and 0.97-1.02x its time with every neighbour whole. The
evaluator (explorer/throughput/evaluator.py) places a layer's time between those two measured
contexts by the parameters of its region (explorer/throughput/device_profile.py, `LayerTimes.ms_in`);
this module finds the regions.
"""
from __future__ import annotations

from collections.abc import Iterable

from networkx.utils import UnionFind


def region_params(layers: Iterable[str], edges: Iterable[tuple[str, str]],
                  phases: dict[str, int], params: dict[str, int]) -> dict[str, int]:
    """{layer: parameters of its region} for every layer of `layers` run in Φ > 1 phases:
    the region is the connected set of such layers joined by the edges between them (a
    whole layer, or a layer outside `layers`, e.g. of another pipeline stage, separates)."""
    return _per_region(layers, edges, phases, params)


def region_sizes(layers: Iterable[str], edges: Iterable[tuple[str, str]],
                 phases: dict[str, int]) -> dict[str, int]:
    """{layer: layers of its region} (as region_params): a region step computes them in one
    call per band (deploy/build/regions.py), so a layer with a neighbour in its region runs
    fused, as in a profile's ladder, where one alone runs a call per phase."""
    return _per_region(layers, edges, phases, {})


def _per_region(layers: Iterable[str], edges: Iterable[tuple[str, str]],
                phases: dict[str, int], weight: dict[str, int]) -> dict[str, int]:
    """{layer: sum of `weight` over its region (1 per layer where absent)}."""
    split = [n for n in layers if phases.get(n, 1) > 1]
    sets = UnionFind(split)
    for a, b in edges:
        if a in sets.parents and b in sets.parents:
            sets.union(a, b)
    total: dict[str, int] = {}
    for n in split:
        r = sets[n]
        total[r] = total.get(r, 0) + (weight.get(n, 0) if weight else 1)
    return {n: total[sets[n]] for n in split}


def beside_parts(layers: Iterable[str], edges: Iterable[tuple[str, str]],
                 phases: dict[str, int]) -> set[str]:
    """The whole layers of `layers` with a producer or consumer of `layers` in parts: they
    read or write rows rings instead of ONNX Runtime's blocked layout (measured on
    MobileNetV2, one thread: whole layers beside parts took a median 1.08-1.12x their time
    between whole layers, up to 1.45x; explorer/throughput/device_profile.py's `beside_ms`)."""
    inside = set(layers)
    out = set()
    for a, b in edges:
        if a in inside and b in inside:
            pa, pb = phases.get(a, 1) > 1, phases.get(b, 1) > 1
            if pa != pb:
                out.add(b if pa else a)
    return out


def ring_side(graph, layer: str, phases: dict[str, int], inside: set[str] | None = None) -> str:
    """Whether whole layer `layer`, beside a layer by parts, reads a rows ring ("in": a
    producer in parts), writes one ("out": a consumer in parts) or both; only neighbours in
    `inside` (its partition) count, all of them without it."""
    def split(ns) -> bool:
        return any(phases.get(m, 1) > 1 for m in ns if inside is None or m in inside)
    reads, writes = split(graph.predecessors(layer)), split(graph.successors(layer))
    return "both" if reads and writes else "in" if reads else "out"

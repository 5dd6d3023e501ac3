"""Fused tiling as an execution mode beside whole and by-parts layers: memory and time.

A tiled group (csdf.tiling.Group: a chain of layers with an N x M grid, DeepThings' fused
tile partitioning as MAFAT uses it) runs as one step of its partition: N x M calls, each
computing one output tile through every layer of the group from its input region (halo
recomputed). In the derivation (DeriveApplicationWithReducedBufs with tilings):

- the group's layers run whole (one phase each) and consecutively in the schedule (moving a
  chain's layers together keeps the order topological: nothing outside reads its inner
  tensors); the step of the group is its first layer's, the others are part of it;
- the group's input and output edges are ordinary buffers, as the analysis sizes them for
  whole layers; the input is read until the last tile and the output written from the
  first, so both stay alive over the whole group;
- each internal edge is one per-tile buffer of the largest tile region of that tensor,
  alive over the group's steps; Algorithm 1 places all of them like any other buffer;
- time: per tile and layer, the whole layer's time from the evaluator scaled by the tile's
  share of the layer's output (so the recomputed halo costs what it computes), plus, for
  every tile beyond the first, each layer's cost of one more call: what one more phase of
  that layer costs by parts in the same profile (`layer_call_ms`), so tiles and row parts
  pay for their calls alike (a roofline's phase_overhead_us; a measured profile's slope of
  the layer's time over its phase count, measured in deployments by `explore profile`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from csdf.model import EdgeId, edge_name
from csdf.tiling import Group, tile_buffer_elements, tile_group
from explorer.app.model import Application
from explorer.memory.cache import RunCache
from explorer.plan.derive import Derived, PartView, Phases, cached_view
from explorer.memory.lifetimes import EdgeUse

if TYPE_CHECKING:
    from explorer.throughput.evaluator import Evaluator

Tilings = dict[str, list[Group]]          # cnn -> its tiled groups


def force_whole(phases: Phases, tilings: Tilings) -> Phases:
    """Phases with every layer of a tiled group whole."""
    out = {c: dict(ph) for c, ph in phases.items()}
    for cnn, groups in tilings.items():
        for g in groups:
            for layer in g.layers:
                out.setdefault(cnn, {})[layer] = 1
    return out


def contiguous(firings: list[str], groups: list[Group]) -> list[str]:
    """The firing list with each group's layers moved together, at its last layer's place."""
    members = {layer: g for g in groups for layer in g.layers}
    out: list[str] = []
    for name in firings:
        g = members.get(name)
        if g is None:
            out.append(name)
        elif name == g.layers[-1]:
            out.extend(g.layers)
    return out


def stretch_groups(uses: list[EdgeUse], app: Application, parts: dict[str, list[str]],
             tilings: Tilings) -> list[EdgeUse]:
    """Keep the group's input, inner and output edges alive over the group's steps."""
    span_of: dict[tuple[str, str], tuple[str, int, int]] = {}   # (cnn, layer) -> group steps
    for part in app.partitions:
        firings = parts[part.name]
        for g in tilings.get(part.cnn, []):
            if g.layers[0] in part.layers:
                first, last = firings.index(g.layers[0]), firings.index(g.layers[-1])
                for layer in g.layers:
                    span_of[(part.cnn, layer)] = (part.name, first, last)
    if not span_of:
        return uses
    out = []
    for u in uses:
        src, dst = EdgeId.parse(u.name).ends
        spans = []
        for part, a, b in u.spans:
            reader = span_of.get((u.cnn, dst))
            if reader is not None and reader[0] == part:     # read by a group: till its last tile
                b = max(b, reader[2])
            writer = span_of.get((u.cnn, src))
            if writer is not None and writer[0] == part:     # written by a group: from its first
                a = min(a, writer[1])
            spans.append((part, a, b))
        out.append(EdgeUse(u.name, u.cnn, u.size, tuple(spans)))
    return out


def derive_tiled(app: Application, phases: Phases, tilings: Tilings,
                 cache: RunCache | None = None, workspace: dict | None = None) -> Derived:
    """explorer.plan.derive.derive with tiled groups (module doc). `workspace`: measured tables
    as there; a group's layers count theirs as `tile_workspace` scales it."""
    from explorer.memory.lifetimes import edge_uses
    from explorer.memory.buffers import memory_bytes
    from explorer.throughput.runtime_costs import output_bytes, session_bytes, workspace_bytes
    from explorer.memory.reuse import algorithm1

    phases = force_whole(phases, tilings)
    views = {p.name: cached_view(app, p, phases, cache) for p in app.partitions}
    firings = {p.name: contiguous(list(views[p.name].firings), tilings.get(p.cnn, []))
               for p in app.partitions}
    sizes: dict[str, int] = {}
    for p in app.partitions:
        for (src, dst), n in views[p.name].elements.items():
            sizes[edge_name(p.cnn, src, dst)] = int(n)
    for cnn, groups in tilings.items():
        for g in groups:
            for (src, dst), n in tile_buffer_elements(app.cnns[cnn], g).items():
                sizes[edge_name(cnn, src, dst)] = int(n)
    uses = stretch_groups(edge_uses(app, firings, sizes, cache=cache), app, firings, tilings)
    buffers = algorithm1(uses, app.pipelines)
    param, buf, total = memory_bytes(app, buffers, cache)
    ws = workspace_bytes(app, phases, tile_workspace(app, tilings, workspace))
    state = session_bytes(app, phases, workspace)    # a tile model: its layers' whole ones
    outs = output_bytes(app, workspace)
    parts = {n: PartView(firings[n], v.rows, v.elements) for n, v in views.items()}
    return Derived(phases, parts, uses, buffers, int(param), int(buf), int(total + ws + state + outs),
                   sizes, ws, state, outs)


def tile_workspace(app: Application, tilings: Tilings, tables: dict | None) -> dict | None:
    """Measured workspace tables with each tiled layer's whole-layer workspace scaled by its
    largest tile's share of the layer's output pixels: the backend's scratch (im2col-like)
    grows with the output it computes per call. An estimate: tile models are not measured."""
    if not tables or not tilings:
        return tables
    from dataclasses import replace
    out = {c: dict(t) for c, t in tables.items()}
    for cnn, groups in tilings.items():
        model, table = app.cnns[cnn], out.get(cnn, {})
        for g in groups:
            tiles = tile_group(model, list(g.layers), g.n, g.m)
            for k, layer in enumerate(g.layers):
                t = table.get(layer)
                if t is None or not t.bytes.whole_ws_bytes:
                    continue
                h, w = (int(v) for v in model.layer(layer).output_shape[2:])
                most = max(tt.layers[k].out_h.size * tt.layers[k].out_w.size for tt in tiles)
                ws = -(-t.bytes.whole_ws_bytes * most // (h * w))
                table[layer] = replace(t, bytes=replace(t.bytes, whole_ws_bytes=ws))
    return out


def group_ms(evaluator: Evaluator, cnn: str, group: Group, processor: str) -> float:
    """Time of one tiled group per frame: every tile's share of every layer's whole time
    (halo recomputation included) + each layer's call cost per extra tile (module doc)."""
    model = evaluator.app.cnns[cnn]
    tiles = tile_group(model, list(group.layers), group.n, group.m)
    total = 0.0
    for k, layer in enumerate(group.layers):
        whole = evaluator.layer_time(cnn, layer, 1, processor)
        h, w = (int(v) for v in model.layer(layer).output_shape[2:])
        share = sum(t.layers[k].out_h.size * t.layers[k].out_w.size for t in tiles) / (h * w)
        total += whole * share + (len(tiles) - 1) * layer_call_ms(evaluator, cnn, layer, processor)
    return total


def layer_call_ms(evaluator: Evaluator, cnn: str, layer: str, processor: str) -> float:
    """The cost of one more call of `layer`, as the profile charges one more phase by parts:
    a measured layer's time per frame rises from whole (1 phase) to its most phases measured
    by this much per phase (never below 0; `default_phase_us` for a layer measured whole
    only); a roofline processor's phase_overhead_us."""
    prof = evaluator.profile
    table = evaluator.tables.get(cnn)
    if table is not None and layer in table:
        t = table[layer]
        if t.by_phases:
            most = max(t.by_phases)
            return max(0.0, (t.by_phases[most] - t.whole_ms) / (most - 1))
        if t.part_ms is not None and t.phases and t.phases > 1:
            return max(0.0, (t.part_ms * t.phases - t.whole_ms) / (t.phases - 1))
        return prof.default_phase_us * 1e-3
    roof = prof.processors.get(processor)
    return roof.phase_overhead_us * 1e-3 if roof is not None else prof.default_phase_us * 1e-3


def frame_ms(evaluator: Evaluator, phases: Phases, tilings: Tilings) -> dict[str, float]:
    """explorer.throughput.evaluator.Evaluator.frame_ms with tiled groups timed by `group_ms`."""
    app = evaluator.app
    phases = force_whole(phases, tilings)
    times: dict[str, float] = {}
    for part in app.partitions:
        t = evaluator.partition_ms(part.name, phases)
        for g in tilings.get(part.cnn, []):
            if g.layers[0] in part.layers:
                t -= sum(evaluator.layer_time(part.cnn, l, 1, part.processor) for l in g.layers)
                t += group_ms(evaluator, part.cnn, g, part.processor)
        times[part.name] = t
    groups = app.pipelines or [[p.name] for p in app.partitions]
    seen = {name for g in groups for name in g}
    groups = list(groups) + [[p.name] for p in app.partitions if p.name not in seen]
    frame = {cnn: 0.0 for cnn in app.cnns}
    for group in groups:
        period = evaluator.set_period_ms(group, times)
        for cnn in {app.partition(n).cnn for n in group}:
            frame[cnn] += period
    return frame


def fps(evaluator: Evaluator, phases: Phases, tilings: Tilings) -> dict[str, float]:
    return {c: (1000.0 / ms if ms > 0 else float("inf"))
            for c, ms in frame_ms(evaluator, phases, tilings).items()}


"""The memory model of the paper (Section 2.4, Equations 1-4) and the plain buffer type.

M = M_par + M_buf (Eq. 1). M_par = stored parameters x par_bytes (Eq. 2), summed over the
CNNs. M_buf = sum over buffers of size x data_bytes (Eq. 3), where a buffer's size is the
largest edge it ever holds (Eq. 4). Sizes are kept in elements until the last moment so the
paper's element figures (Tables 1, 8, 9) can be checked exactly.

Sessions (an addition to the paper's model, `session_bytes`): the state each loaded step
model's session keeps, measured by `explore profile` per layer, summed (session_bytes).

Workspace (an addition to the paper's model, `workspace_bytes`): the scratch a backend needs
while it runs a layer (im2col buffers, layout reorders, a gathered window), measured per layer
by `explore profile`. A deployment serves every step from one shared arena, so the bytes are
the largest step's, summed over partitions that run at the same time (one pipeline set) and
the largest over sets, which never overlap. With no measured workspace it is 0.

Parameters are the ones actually stored after BatchNorm folding (`CNN.param_count`): that is
what a TensorRT engine keeps and what reproduces the paper's MobileNetV2 figures (see
docs/memory.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from csdf.model import CNN
from csdf.regions import beside_parts, region_params, region_sizes, ring_side
from explorer.memory.cache import RunCache


@dataclass
class Buffer:
    """One memory buffer: the edge uses it holds (names, in the order they were placed),
    its size in elements (the largest of them) and, when an offset planner placed it
    (explorer.memory.placement), its offset in the arena in elements; None = shared objects laid
    one after another."""
    edges: list[str] = field(default_factory=list)
    size: int = 0
    offset: int | None = None


def param_elements(cnn: CNN, cache: RunCache | None = None) -> int:
    """Parameters stored for `cnn` (folded), kept in `cache`: the search asks often."""
    if cache is None:
        return int(cnn.param_count)
    kept = cache.of(cnn)
    if kept.params is None:
        kept.params = int(cnn.param_count)
    return kept.params


def buffer_elements(buffers: Iterable[Buffer]) -> int:
    """Arena elements: the sum of buffer sizes (the bracket of Eq. 3) for shared objects;
    the largest offset + size once an offset planner placed every buffer."""
    buffers = list(buffers)
    if buffers and all(b.offset is not None for b in buffers):
        return max(b.offset + b.size for b in buffers)
    return sum(b.size for b in buffers)


def arena_offsets(buffers: list[Buffer]) -> list[int]:
    """Offset of every buffer in elements: its own, or one after another (shared objects)."""
    if buffers and all(b.offset is not None for b in buffers):
        return [int(b.offset) for b in buffers]
    out, at = [], 0
    for b in buffers:
        out.append(at)
        at += b.size
    return out


def memory_bytes(app, buffers: Iterable[Buffer], cache: RunCache | None = None
                 ) -> tuple[int, int, int]:
    """(param_bytes, buffer_bytes, total) of `app` with `buffers` (Eq. 1-4)."""
    params = sum(param_elements(cnn, cache) for cnn in app.cnns.values()) * app.precision.par_bytes
    bufs = buffer_elements(buffers) * app.precision.data_bytes
    return params, bufs, params + bufs


def workspace_bytes(app, phases: dict[str, dict[str, int]], tables: dict | None) -> int:
    """Backend workspace of `app` under `phases`: per partition the largest measured
    workspace of its layers (whole_ws_bytes, part_ws_bytes for a layer by parts, or what its
    by-parts models needed in the profile's ladder, when measured: `_band`), summed
    over the partitions of a pipeline set, the largest over sets. `tables`: {cnn: {layer:
    explorer.throughput.device_profile.LayerTimes}}, None or empty when nothing was measured."""
    if not tables:
        return 0
    per_part: dict[str, int] = {}
    for part in app.partitions:
        table, ph = tables.get(part.cnn, {}), phases.get(part.cnn, {})
        contexts = _contexts(app.cnns[part.cnn], part.layers, ph)
        best = 0
        for layer in part.layers:
            t = table.get(layer)
            if t is not None:
                ws = t.part_ws_bytes if ph.get(layer, 1) > 1 else t.whole_ws_bytes
                band = _band(app.cnns[part.cnn], layer, ph, contexts, t)
                best = max(best, int(ws or 0) if band is None else band[1])
        per_part[part.name] = best
    return max((sum(per_part.get(p, 0) for p in group) for group in app.pipelines), default=0)


def _contexts(cnn, layers: list[str], ph: dict[str, int]):
    """Per partition (`layers`): {layer: parameters of its by-parts region}, {layer: layers
    of that region}, the whole layers beside a layer by parts (csdf/regions.py), and the
    partition's layers."""
    params = {n: cnn.layer(n).param_count for n in layers}
    edges = list(cnn.graph.edges())
    return (region_params(layers, edges, ph, params), region_sizes(layers, edges, ph),
            beside_parts(layers, edges, ph), set(layers))


def _band(cnn, layer: str, ph: dict[str, int], contexts, t) -> tuple[int, int] | None:
    """(session state, workspace) of the models a layer runs in, as the profile measured
    them in the same context: by parts in a region with other layers of its partition
    (bands of region steps; placed by the region's parameters, LayerTimes.band_bytes) or
    alone, whole beside a layer by parts (its model reads or writes a rows ring); None for a
    whole layer among whole ones, or unmeasured."""
    if not hasattr(t, "band_bytes"):
        return None
    regions, sizes, beside, inside = contexts
    n = ph.get(layer, 1)
    if n <= 1:
        if layer not in beside:
            return None
        return t.band_bytes(1, side=ring_side(cnn.graph, layer, ph, inside))
    if sizes.get(layer, 1) > 1:
        return t.band_bytes(n, region=regions[layer], own=cnn.layer(layer).param_count)
    return t.band_bytes(n, alone=True)


def session_bytes(app, phases: dict[str, dict[str, int]], tables: dict | None) -> int:
    """Session state of `app` under `phases` (issue 27, item 1): every step model a
    deployment loads keeps its session for the whole run, so the measured state of each
    layer's model (whole_session_bytes, or part_session_bytes for a layer by parts, twice
    when its last part is shorter: a second part model) is summed over every layer of every
    partition. 0 when nothing was measured. With a profile that measured the by-parts steps
    of its ladder (`explore profile --steps regions`, deploy/profile/bands.py), a layer by
    parts counts what its models held there instead: beside a layer by parts, its share of
    the band models of region steps (deploy/build/regions.py); alone, its own models.
    And every call a frame makes holds its binding to the arena for the run: a layer's Φ
    calls (its `call_bytes` each, measured by the profile's ladder; region steps make at
    most one call per firing, so this bounds them from above: YOLOv2-16's least-memory
    plan counts 962 calls, 2.7 MiB, and runs 655 as region steps); twice for a step bound
    apart on each frame parity (`parity_bound`)."""
    if not tables:
        return 0
    from csdf.model import INPUT
    from csdf.parts import rows_per_phase
    total = 0
    for part in app.partitions:
        table, ph, cnn = tables.get(part.cnn, {}), phases.get(part.cnn, {}), app.cnns[part.cnn]
        contexts = _contexts(cnn, part.layers, ph)
        twice = parity_bound(app, part, cnn)
        for layer in part.layers:
            t = table.get(layer)
            if t is None:
                continue
            if cnn.layer(layer).op == INPUT:     # the frame copy: no model, no binding
                continue
            n = ph.get(layer, 1)
            total += max(1, n) * int(getattr(t, "call_bytes", None) or 0) * (2 if layer in twice else 1)
            band = _band(cnn, layer, ph, contexts, t)
            if band is not None:
                total += band[0]
            elif n > 1:
                height = int(cnn.layer(layer).output_shape[2])
                models = 1 if height % rows_per_phase(height, n) == 0 else 2
                total += models * int(t.part_session_bytes or 0)
            else:
                total += int(t.whole_session_bytes or 0)
    return total


def parity_bound(app, part, cnn: CNN) -> set[str]:
    """Layers of partition `part` whose steps bind each frame parity apart, two ONNX Runtime
    bindings each (deploy/runtime/executor.py binds a step once when both parities bind the
    same views): in a CNN whose partitions pipeline frames, its output layers (an output
    array per parity); and every layer that reads or writes a tensor stored twice
    (explorer.memory.lifetimes: an edge between two partitions of one pipeline set; with one
    buffer per tensor, explorer.memory.tensors, every edge of its tensor). The executor's
    rule, kept in step by tests/test_session_bytes.py."""
    home = {name: p.name for p in app.partitions_of(cnn.name) for name in p.layers}
    pipelined = app.pipelines_frames(cnn.name)
    out = {name for name in part.layers if pipelined and cnn.graph.out_degree(name) == 0}
    per_tensor = app.placement != "shared-objects"
    for src, dst in cnn.graph.edges:
        a, b = home.get(src), home.get(dst)
        if a is None or b is None or a == b or b not in app.pipeline_of(a):
            continue
        out |= {src, dst} | (set(cnn.graph.successors(src)) if per_tensor else set())
    return out & set(part.layers)


def output_bytes(app, tables: dict | None) -> int:
    """The CNNs' outputs as the deployment hands them over (deploy/runtime/executor.py: one
    array per output layer outside the arena, two for a CNN whose stages pipeline frames),
    counted with the other runtime bytes where the tables measured the runtime (session state,
    `explore profile`; 0 otherwise, e.g. a primitive plan's workspace-only tables): YOLOv2-16's
    38x38x256 output is 1.4 MiB of its least-memory deployment's 29 MiB."""
    if not tables or not any(getattr(t, "whole_session_bytes", None) is not None
                             for table in tables.values() for t in table.values()):
        return 0
    total = 0
    for name, cnn in app.cnns.items():
        copies = 2 if app.pipelines_frames(name) else 1
        for layer in cnn.order():
            if cnn.graph.out_degree(layer) == 0:
                n, c, h, w = (int(v) for v in cnn.layer(layer).output_shape)
                total += copies * n * c * h * w * app.precision.data_bytes
    return total


def naive(uses) -> list[Buffer]:
    """No reuse: one buffer per edge use (the paper's Table 1; a double-buffered pipeline
    edge is two uses and so two buffers)."""
    return [Buffer([u.name], u.size) for u in uses]

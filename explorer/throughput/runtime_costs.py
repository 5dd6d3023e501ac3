"""The runtime's own memory, besides the paper's parameters and buffers (explorer/memory/
buffers.py, Eq. 1-4): what a deployment's engine holds for the step models and calls it
runs, per backend, as `explore profile` measured it there (deploy/profile/* writes the
figures into the device profile; explorer/throughput/device_profile.py reads them, per layer,
into a `LayerBytes` on explorer.throughput.layer_times.LayerTimes.bytes). `runtime_costs`
gives all of it for an application under phases as one record, `RuntimeCosts`:

- workspace: the scratch a backend needs while it runs a layer (im2col buffers, layout
  reorders, a gathered window). A deployment serves every step from one shared arena, so
  the bytes are the largest step's, summed over partitions that run at the same time (one
  pipeline set) and the largest over sets, which never overlap (`workspace_bytes`);
- sessions and bindings: the state each loaded step model's session keeps, and what each
  call of a frame holds bound to the arena, summed (`session_bytes`, `parity_bound`);
- outputs: the CNNs' output arrays the deployment hands over (`output_bytes`).

With no measured tables every figure is 0 (the paper's model alone).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from csdf.model import CNN
from csdf.regions import beside_parts, region_params, region_sizes, ring_side
from explorer.memory.placement import planner


@dataclass(frozen=True)
class LayerBytes:
    """The runtime's bytes for one layer's step models, as the profile measured them
    (None or empty: not measured). Field names are the profile file's keys."""
    whole_ws_bytes: int | None = None       # backend workspace of the layer run whole
    part_ws_bytes: int | None = None        # ... of one phase
    whole_session_bytes: int | None = None  # session state of the layer's whole step model
    part_session_bytes: int | None = None   # ... of its part model
    # region steps (`explore profile --steps regions`): in the ladder's deployment at Φ,
    # the session state of the by-parts models the layer is computed in (band models shared
    # by the layer's firings in them), and the largest workspace of those models
    # (deploy/profile/bands.py)
    band_session_bytes: dict[int, float] = field(default_factory=dict)
    band_ws_bytes: dict[int, float] = field(default_factory=dict)
    # the same with every neighbour whole (the ladder's alone deployments)
    alone_session_bytes: dict[int, float] = field(default_factory=dict)
    alone_ws_bytes: dict[int, float] = field(default_factory=dict)
    # the layer whole beside a layer by parts (its model reads or writes a rows ring): the
    # largest over the ladder's deployments where it was so ({side: bytes}, side "in"
    # reading a ring, "out" writing one, "both"; a plain number: any side)
    beside_session_bytes: int | dict[str, int] | None = None
    beside_ws_bytes: int | dict[str, int] | None = None
    # what each call of the layer's steps holds in a deployment (its ONNX Runtime binding
    # and the executor's views; deploy/profile/ladder.py `step_times`)
    call_bytes: int | None = None

    def measured(self) -> bool:
        """Whether the profile measured the runtime (a session), not only a workspace."""
        return self.whole_session_bytes is not None

    def band_bytes(self, phases: int, alone: bool = False, share: float | None = None,
                   side: str | None = None) -> tuple[int, int] | None:
        """(session state, workspace) of the models computing this layer in `phases`
        phases beside layers by parts (or `alone`), at the ladder's nearest Φ; whole
        (`phases` 1) beside a layer by parts; None where the profile measured none.
        `share` (where the layer's by-parts region lies between the layer alone, 0, and the
        ladder's region, 1: LayerTimes.share): between the figures alone and the ladder's,
        as its time (LayerTimes.ms_in). Why: a band model
        holds a base state besides its nodes' (~20 KiB against ~2.6 KiB a node), shared in
        the ladder by every layer of a region that spans the CNN; MobileNetV2's first nine
        layers by parts held 1.5 MiB of by-parts session state where the ladder's shares
        gave 0.76 and the layers alone 1.81. Whole beside parts: the figures of its `side`
        ("in": it reads a rows ring, "out": writes one, "both"), the largest measured where
        that side was not: YOLOv2-16's conv8 needs 8.4 MiB of workspace writing a ring and
        reading one, and its front plan with conv8 reading one held 5 MiB less than planned."""
        if phases <= 1:
            if self.beside_session_bytes is None:
                return None
            return _side(self.beside_session_bytes, side), _side(self.beside_ws_bytes, side)
        state = self.alone_session_bytes if alone else self.band_session_bytes
        ws = self.alone_ws_bytes if alone else self.band_ws_bytes
        if not state:
            return None
        near = min(state, key=lambda f: (abs(f - phases), -f))
        got = int(state[near]), int(ws.get(near, 0))
        if alone or share is None or not self.alone_session_bytes:
            return got
        lone = self.band_bytes(phases, alone=True)
        w = share
        return (int(round(lone[0] + w * (got[0] - lone[0]))),
                int(round(lone[1] + w * (got[1] - lone[1]))))



@dataclass(frozen=True)
class RuntimeCosts:
    """The runtime's bytes of an application under phases (module doc), all in the plan's
    memory besides parameters and buffers."""
    workspace: int = 0
    session: int = 0
    outputs: int = 0

    @property
    def total(self) -> int:
        return self.workspace + self.session + self.outputs


def runtime_costs(app, phases: dict[str, dict[str, int]], tables: dict | None) -> RuntimeCosts:
    """Workspace, session state with bindings, and outputs of `app` under `phases`;
    `tables`: {cnn: {layer: explorer.throughput.layer_times.LayerTimes}} as measured, None
    or empty when nothing was."""
    return RuntimeCosts(workspace_bytes(app, phases, tables), session_bytes(app, phases, tables),
                        output_bytes(app, tables))


def workspace_bytes(app, phases: dict[str, dict[str, int]], tables: dict | None) -> int:
    """Backend workspace of `app` under `phases`: per partition the largest measured
    workspace of its layers (whole_ws_bytes, part_ws_bytes for a layer by parts, or what its
    by-parts models needed in the profile's ladder, when measured: `_band`), summed
    over the partitions of a pipeline set, the largest over sets. `tables`: {cnn: {layer:
    explorer.throughput.layer_times.LayerTimes}}, None or empty when nothing was measured."""
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
                ws = t.bytes.part_ws_bytes if ph.get(layer, 1) > 1 else t.bytes.whole_ws_bytes
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
    """Session state of `app` under `phases`: every step model a
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
            total += max(1, n) * int(t.bytes.call_bytes or 0) * (2 if layer in twice else 1)
            band = _band(cnn, layer, ph, contexts, t)
            if band is not None:
                total += band[0]
            elif n > 1:
                height = int(cnn.layer(layer).output_shape[2])
                models = 1 if height % rows_per_phase(height, n) == 0 else 2
                total += models * int(t.bytes.part_session_bytes or 0)
            else:
                total += int(t.bytes.whole_session_bytes or 0)
    return total


def parity_bound(app, part, cnn: CNN) -> set[str]:
    """Layers of partition `part` whose steps bind each frame parity apart, two ONNX Runtime
    bindings each (deploy/runtime/executor.py binds a step once when both parities bind the
    same views): in a CNN whose partitions pipeline frames, its output layers (an output
    array per parity); and every layer that reads or writes a tensor stored twice
    (explorer.memory.lifetimes: an edge between two partitions of one pipeline set; with one
    buffer per tensor, explorer.memory.tensors, every edge of its tensor). The executor's
    rule, kept in step by tests/explorer/memory/test_session_bytes.py."""
    home = {name: p.name for p in app.partitions_of(cnn.name) for name in p.layers}
    pipelined = app.pipelines_frames(cnn.name)
    out = {name for name in part.layers if pipelined and cnn.graph.out_degree(name) == 0}
    per_tensor = planner(app.placement).per_tensor
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
    if not tables or not any(t.bytes.measured() for table in tables.values() for t in table.values()):
        return 0
    total = 0
    for name, cnn in app.cnns.items():
        copies = 2 if app.pipelines_frames(name) else 1
        for layer in cnn.order():
            if cnn.graph.out_degree(layer) == 0:
                n, c, h, w = (int(v) for v in cnn.layer(layer).output_shape)
                total += copies * n * c * h * w * app.precision.data_bytes
    return total


def _side(value: int | dict[str, int] | None, side: str | None) -> int:
    """A beside figure for `side`: the side's own, else the largest measured."""
    if isinstance(value, dict):
        return int(value[side]) if side in value else int(max(value.values(), default=0))
    return int(value or 0)

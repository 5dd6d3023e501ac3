"""DeriveApplicationWithReducedBufs (Algorithm 2's inner step) and the chosen plan.

A chromosome has one gene per layer that Table 2 lets go by parts, CNN by CNN in the app's
order and each CNN's topological order (a gene for a layer that must stay whole would be
neutral: Equation 6 gives it one phase either way, so it is left out and the search space
is the same). What a gene means is explorer.plan.genes' business (granularity ladder, or the
paper's binary gene). For a chromosome:

  genes -> phases (explorer.plan.genes.GeneSpace.decode, or Eq. 6 csdf.parts.phases_for) -> per partition: CSDF graph, schedule and
  minimal row buffers (csdf.partition_analysis.analyse_partition; a search keeps its views
  by partition and phases in explorer.memory.cache.RunCache) -> edge lifetimes
  (explorer.memory.lifetimes) -> Algorithm 1 (explorer.memory.reuse) -> memory (Eq. 1-4,
  explorer.memory.buffers; the runtime's own bytes, explorer.throughput.runtime_costs).

An explicit schedule of the app file wins for its partition when it fires every layer as
many times as the phases say (a schedule of whole layers no longer fits once a layer goes
by parts; then the analysis' schedule is used). `plan_for` turns a derivation into the
plan.json that `deploy` reads (docs/architecture.md, "Plan"), and refuses to return a plan
whose buffers fail explorer.memory.validity.check_plan.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from csdf.model import CNN, EdgeId, edge_name
from csdf.partition_analysis import PartitionAnalysis, analyse_partition, row_buffers
from csdf.parts import can_split, phases_for, rows_per_phase
from csdf.to_csdf import edge_windows
from explorer.app.layer_precision import AUTO, LayerPrecisions
from explorer.app.model import Application
from explorer.memory.cache import RunCache
from explorer.plan.genes import GeneSpace, gene_space
from explorer.plan.model import Constraints, Plan, PlanBuffer, PlanEdge, PlanPartition
from sdf3.analysis import AnalysisError
from sdf3.errors import InputError
from sdf3.notation import compact

if TYPE_CHECKING:
    from explorer.throughput.evaluator import Evaluator

Phases = dict[str, dict[str, int]]


@dataclass
class PartView:
    """What the memory layer needs of one analysed partition under one phase choice."""
    firings: list[str]
    rows: dict[tuple[str, str], int]           # internal edges: rows held at most
    elements: dict[tuple[str, str], int]
    lives: dict = field(default_factory=dict)  # whole edges stored by rows: Rows (offsets only)


@dataclass
class Derived:
    """One application derived with reduced buffers: phases, schedules, buffers, memory."""
    phases: Phases
    parts: dict[str, PartView]                 # by qualified partition name
    uses: list                                 # explorer.memory.lifetimes.EdgeUse
    buffers: list                              # explorer.memory.buffers.Buffer
    param_bytes: int
    buffer_bytes: int
    memory_bytes: int
    sizes: dict[str, int] = field(default_factory=dict)   # internal edge name -> elements
    workspace_bytes: int = 0                   # measured backend scratch (in memory_bytes)
    session_bytes: int = 0                     # measured session state (in memory_bytes)
    output_bytes: int = 0                      # the CNNs' output arrays (in memory_bytes)
    # precision per layer (explorer/app/layer_precision.py); None: every layer at the app's.
    # When given, `uses` and `buffers` are sized in bytes (explorer/memory/layer_bytes.py)
    layers: LayerPrecisions | None = None


def gene_layers(app: Application) -> list[tuple[str, str]]:
    """(cnn, layer) of every gene, in gene order."""
    return [(name, layer) for name, cnn in app.cnns.items() for layer in cnn.order()
            if can_split(cnn.layer(layer))]


def gene_labels(app: Application) -> list[str]:
    return [f"{c}.{l}" for c, l in gene_layers(app)]


def whole_phases(app: Application) -> Phases:
    """Every layer of every CNN in one phase."""
    return {name: {layer: 1 for layer in cnn.order()} for name, cnn in app.cnns.items()}


def phases_of(app: Application, genes: tuple[int, ...] | list[int],
              where: list[tuple[str, str]] | None = None,
              space: GeneSpace | None = None) -> Phases:
    """{cnn: {layer: phases}} for every layer of a chromosome: decoded by `space`
    (explorer.plan.genes), or without one Equation 6 of binary genes. `where` is
    gene_layers(app), passed in by callers that ask often."""
    if space is not None:
        return space.decode(genes, whole_phases(app))
    where = gene_layers(app) if where is None else where
    if len(genes) != len(where):
        raise ValueError(f"expected {len(where)} genes, got {len(genes)}")
    by_cnn: dict[str, dict[str, int]] = {name: {} for name in app.cnns}
    for (cnn, layer), g in zip(where, genes):
        by_cnn[cnn][layer] = int(g)
    return {name: phases_for(cnn, by_cnn[name]) for name, cnn in app.cnns.items()}


def uniform_phases(app: Application, by_parts: bool) -> Phases:
    """Every layer whole (reuse only), or every layer that can by parts ([17])."""
    return phases_of(app, [int(by_parts)] * len(gene_layers(app)))


def _analyse(cnn: CNN, part_name: str, layers: list[str], phases: dict[str, int],
             cache: RunCache | None = None) -> PartitionAnalysis:
    try:
        return analyse_partition(cnn, layers, phases, None if cache is None else cache.analysis)
    except AnalysisError as err:
        raise InputError(f"partition {part_name}: dataflow analysis failed: {err}") from None


def part_view(app: Application, part_name: str, phases: Phases,
              cache: RunCache | None = None) -> PartView:
    """Schedule and row buffers of one partition; the app's explicit schedule wins when it
    fits the phases, else a planner that reorders has the schedule chosen for total memory
    (explorer.memory.policies). A per-tensor planner gets one ring per tensor
    (csdf/shared_rings.py) and the row lives of tensors stored by rows; the others the
    paper's ring per edge."""
    from explorer.memory.placement import planner
    chosen = planner(app.placement)
    part = app.partition(part_name)
    cnn = app.cnns[part.cnn]
    a = _analyse(cnn, part_name, part.layers, phases.get(part.cnn, {}), cache)
    given = app.schedules.get(part_name)
    fits = bool(given) and Counter(given) == Counter(a.firing_counts)
    if not fits and chosen.reorders:
        from explorer.memory.policies import choose      # schedules chosen for total memory
        c = choose(app, part_name, a, cache)
        return PartView(c.firings, c.rows, c.elements, c.lives)
    if not fits or list(given) == a.firings:
        firings, rows = list(a.firings), a.edge_rows
    else:
        firings = list(given)
        try:
            analysis = None if cache is None else cache.analysis
            rows, _ = row_buffers(a.graph, edge_windows(cnn, a.layers, a.phases, analysis), firings,
                                  analysis)
        except (AnalysisError, IndexError, KeyError) as err:
            raise InputError(f"schedules.{part_name}: cannot run under phases {a.phases}: {err}") from None
    if chosen.per_tensor:
        from explorer.memory.policies import tensor_rows
        rows, elements, lives = tensor_rows(app, part_name, a, firings, rows, cache=cache)
        return PartView(firings, rows, elements, lives)
    elements = {e: rows[e] * (a.edge_elements[e] // max(1, a.edge_rows[e])) for e in rows}
    return PartView(firings, dict(rows), elements)


def cached_view(app: Application, part, phases: Phases, cache: RunCache | None) -> PartView:
    """part_view, kept in `cache.views` by partition and its phases tuple: in a multi-CNN or
    pipelined app most chromosomes change one partition and the others recur."""
    if cache is None:
        return part_view(app, part.name, phases)
    ph = phases.get(part.cnn, {})
    key = (part.name, tuple(int(ph.get(x, 1)) for x in part.layers))
    view = cache.views.get(key)
    if view is None:
        view = cache.views.put(key, part_view(app, part.name, phases, cache))
    return view


def derive(app: Application, phases: Phases, cache: RunCache | None = None,
           workspace: dict | None = None, layers: LayerPrecisions | None = None) -> Derived:
    """DeriveApplicationWithReducedBufs: buffers and memory of the app under `phases`.
    `cache` (explorer.memory.cache.RunCache, kept by the caller across calls) reuses
    partitions already analysed; without one a fresh one serves this call.
    `workspace`: measured per-layer tables ({cnn: {layer: LayerTimes}}) whose workspace
    and session state enter the memory, and the CNNs' output arrays
    (explorer.throughput.runtime_costs). `layers`: each layer's precision; the edge uses
    are then placed in bytes, each at its tensor's width (explorer/memory/layer_bytes.py)."""
    from explorer.memory.lifetimes import edge_uses
    from explorer.memory.buffers import memory_bytes
    from explorer.throughput.runtime_costs import runtime_costs
    from explorer.memory.placement import place, planner

    cache = RunCache() if cache is None else cache
    parts = {p.name: cached_view(app, p, phases, cache) for p in app.partitions}
    sizes: dict[str, int] = {}
    lives = {}
    for p in app.partitions:
        for (src, dst), n in parts[p.name].elements.items():
            sizes[edge_name(p.cnn, src, dst)] = int(n)
        for (src, dst), life in parts[p.name].lives.items():
            lives[edge_name(p.cnn, src, dst)] = life
    uses = edge_uses(app, {n: v.firings for n, v in parts.items()}, sizes, lives, cache)
    if planner(app.placement).per_tensor:
        from explorer.memory.tensors import tensor_uses
        uses = tensor_uses(uses)
    if layers is not None:
        from explorer.memory.layer_bytes import in_bytes
        uses = in_bytes(app, uses, layers)
    buffers = place(uses, app.pipelines, app.placement, cache)
    param, buf, total = memory_bytes(app, buffers, cache, layers)
    rt = runtime_costs(app, phases, workspace)
    ws = rt.workspace
    if layers is not None:       # fp32 copies at precision boundaries, inside the steps
        from explorer.memory.conversions import conversion_bytes
        ws += conversion_bytes(app, phases, layers)
    return Derived(phases, parts, uses, buffers, int(param), int(buf),
                   int(total + rt.total - rt.workspace + ws), sizes, ws, rt.session, rt.outputs,
                   layers)


@dataclass
class Evaluation:
    """The search problem over layer genes (explorer.search.problem.Problem):
    `evaluate(genes) -> (memory_bytes, {cnn: fps})`, the derivation and the plan of a chromosome."""
    app: Application
    evaluator: Evaluator                       # .fps, .tables
    space: GeneSpace | None = None             # None: binary genes of Equation 6
    where: list[tuple[str, str]] = field(default_factory=list)
    cache: RunCache = field(default_factory=RunCache)

    def __post_init__(self) -> None:
        if self.space is None:                 # Equation 6: the two-rung ladder (H, 1)
            self.space = gene_space(self.app, "binary")
        self.where = gene_layers(self.app)
        self._whole = whole_phases(self.app)
        # measured per-layer tables: their runtime bytes count in the memory
        # (explorer/throughput/runtime_costs.py)
        self.workspace = dict(self.evaluator.tables) or None

    def phases(self, genes) -> Phases:
        if self.space is not None:
            return self.space.decode(genes, self._whole)
        return phases_of(self.app, genes, self.where)

    def __call__(self, genes: tuple[int, ...]) -> tuple[int, dict[str, float]]:
        phases = self.phases(genes)
        return (derive(self.app, phases, self.cache, self.workspace).memory_bytes,
                self.evaluator.fps(phases))

    def derive(self, genes) -> Derived:
        return derive(self.app, self.phases(genes), self.cache, self.workspace)

    def plan(self, genes, fps: dict[str, float], met: bool) -> Plan:
        return plan_for(self.app, self.derive(genes), fps, met, genes)


def plan_for(app: Application, d: Derived, fps: dict[str, float], met: bool,
             genes: tuple[int, ...] | list[int] = ()) -> Plan:
    """The plan.json of a derivation; raises RuntimeError when its buffers break the
    validity check (a bug: Algorithm 1 must never share a buffer between live edges)."""
    from explorer.memory.validity import check_plan

    problems = check_plan(d.uses, d.buffers, app.pipelines)
    if problems:
        raise RuntimeError("derived plan fails the buffer validity check: " + problems[0])
    data = app.precision.data_bytes if d.layers is None else 1   # per layer: sizes in bytes
    width = {}
    if d.layers is not None:
        from explorer.memory.layer_bytes import width as tensor_width
        width = {u.name: tensor_width(app, d.layers, u) for u in d.uses}
    edges: dict[EdgeId, PlanEdge] = {}
    buffers: list[PlanBuffer] = []
    size_of = {u.name: int(u.size) for u in d.uses}
    stored = {u.name: u.stored for u in d.uses}
    for i, buf in enumerate(d.buffers):
        names = [EdgeId.parse(e) for name in buf.edges for e in stored.get(name, (name,))]
        for name in buf.edges:
            for edge in stored.get(name, (name,)):      # a tensor use: every edge it stores
                eid = EdgeId.parse(edge)
                shape = tuple(int(v) for v in app.cnns[eid.cnn].edge_shape(eid.src, eid.dst))
                row = shape[0] * shape[1] * shape[3]
                elements = size_of.get(name, row * shape[2] * width.get(name, 1)) // width.get(name, 1)
                edges[eid] = PlanEdge(i, -(-elements // row), elements, shape)
        buffers.append(PlanBuffer(tuple(names), int(buf.size), int(buf.size) * data,
                                  None if buf.offset is None else int(buf.offset) * data))
    firings = {p.name: list(d.parts[p.name].firings) for p in app.partitions}
    return Plan(
        app=str(app.path or ""), name=app.name,
        precision=app.precision.name if d.layers is None else AUTO,
        data_bytes=data, par_bytes=app.precision.par_bytes if d.layers is None else 1,
        layer_precisions={} if d.layers is None else d.layers.by_cnn(),
        memory_bytes=d.memory_bytes, param_bytes=d.param_bytes, buffer_bytes=d.buffer_bytes,
        workspace_bytes=d.workspace_bytes, session_bytes=d.session_bytes,
        output_bytes=d.output_bytes,
        fps={c: float(v) for c, v in fps.items()},
        constraints=Constraints(app.memory, dict(app.fps)),
        constraints_met=bool(met),
        phases={c: dict(ph) for c, ph in d.phases.items()},
        rows={c: {layer: rows_per_phase(app.cnns[c].layer(layer).output_shape[2], n)
                  for layer, n in ph.items()} for c, ph in d.phases.items()},
        partitions=tuple(PlanPartition(p.name, p.cnn, tuple(p.layers), p.processor)
                         for p in app.partitions),
        pipelines=[list(g) for g in app.pipelines],
        schedules={n: compact(f) for n, f in firings.items()},
        firings=firings, edges=edges, buffers=tuple(buffers), genes=[int(g) for g in genes],
        placement=app.placement)

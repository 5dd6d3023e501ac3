"""The cost model of primitive selection (TASO, Wen et al. 2020, Sec. 4.3, Eq. 4-12), read
from a profile's measured `primitives` table (`explore profile --primitives`).

Per layer the candidate primitives with their time t, weight bytes and workspace bytes
(T_i and M_i); per edge the layout-transition costs (Trans_(i,j)): zero when producer and
consumer use one layout, else one reorder of the edge's tensor, timed on this machine. A
ReorderOutput (NCHWc -> NCHW) runs in the producer's step, a ReorderInput (NCHW -> NCHWc) in
the consumer's, so its workspace counts there.

Memory as memtrade counts it: the memory plan's buffers (Eq. 1-4 with every layer whole,
Algorithm 1's reuse) + the weights each chosen primitive holds + workspace: the sum over
layers (strategy "sum": every step keeps its own scratch, Eq. 13/14's accumulated memory) or
one workspace sized by the largest step (strategy "workspace", Eq. 15: ONNX Runtime's one
shared arena, docs/run.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from csdf.model import edge_name
from sdf3.errors import InputError

STRATEGIES = ("sum", "workspace")


@dataclass(frozen=True)
class Option:
    """One primitive of one layer."""
    name: str
    ms: float
    weight_bytes: int
    workspace_bytes: int
    layout: str                       # "nchw" | "nchwc"


@dataclass(frozen=True)
class Edge:
    """Neighbouring layers u -> v (indices into CostModel.layers) and their reorder costs."""
    u: int
    v: int
    to_nchwc_ms: float = 0.0
    to_nchw_ms: float = 0.0
    to_nchwc_ws: int = 0
    to_nchw_ws: int = 0

    def cost(self, a: Option, b: Option) -> tuple[float, int, int]:
        """(ms, workspace bytes, step index holding it) of going from a's layout to b's."""
        if a.layout == b.layout:
            return 0.0, 0, self.v
        if b.layout == "nchwc":
            return self.to_nchwc_ms, self.to_nchwc_ws, self.v
        return self.to_nchw_ms, self.to_nchw_ws, self.u


@dataclass
class Evaluation:
    ms: dict[str, float]               # per CNN: one frame
    time_ms: float                     # all CNNs, one frame each
    weight_bytes: int
    workspace_sum: int
    workspace_max: int
    memory: dict[str, int]             # strategy -> bytes


@dataclass
class CostModel:
    cnns: list[str]
    layers: list[tuple[str, str]]                 # (cnn, layer)
    options: list[list[Option]]
    edges: list[Edge]
    fixed_bytes: int                               # the memory plan's buffers
    meta: dict[str, Any] = field(default_factory=dict)

    def evaluate(self, choice: list[int] | tuple[int, ...]) -> Evaluation:
        """Time and memory of one choice (an option index per layer): Eq. 4-7 directly."""
        ms = {c: 0.0 for c in self.cnns}
        step_ws = self.step_workspaces(choice)
        for i, p in enumerate(choice):
            ms[self.layers[i][0]] += self.options[i][p].ms
        for e in self.edges:
            ms[self.layers[e.u][0]] += e.cost(self.options[e.u][choice[e.u]],
                                              self.options[e.v][choice[e.v]])[0]
        weights = sum(self.options[i][p].weight_bytes for i, p in enumerate(choice))
        wsum, wmax = sum(step_ws), max(step_ws, default=0)
        return Evaluation(ms, sum(ms.values()), weights, wsum, wmax,
                          {"sum": self.fixed_bytes + weights + wsum,
                           "workspace": self.fixed_bytes + weights + wmax})

    def step_workspaces(self, choice) -> list[int]:
        """Workspace bytes of every layer's step under `choice`: its primitive's plus the
        reorders that run inside that step."""
        ws = [self.options[i][p].workspace_bytes for i, p in enumerate(choice)]
        for e in self.edges:
            _, extra, at = e.cost(self.options[e.u][choice[e.u]], self.options[e.v][choice[e.v]])
            ws[at] += extra
        return ws

    def workspace_tables(self, choice) -> dict[str, dict[str, Any]]:
        """{cnn: {layer: LayerTimes}} with each step's time and workspace under `choice`:
        the per-layer workspace term memtrade's memory model reads
        (explorer.throughput.runtime_costs.workspace_bytes via explorer.plan.derive.derive)."""
        from explorer.throughput.layer_times import LayerTimes
        from explorer.throughput.runtime_costs import LayerBytes
        out: dict[str, dict[str, Any]] = {c: {} for c in self.cnns}
        for i, ws in enumerate(self.step_workspaces(choice)):
            cnn, layer = self.layers[i]
            out[cnn][layer] = LayerTimes(self.options[i][choice[i]].ms,
                                           bytes=LayerBytes(whole_ws_bytes=ws))
        return out

    def names(self, choice) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {c: {} for c in self.cnns}
        for (cnn, layer), opts, p in zip(self.layers, self.options, choice):
            out[cnn][layer] = opts[p].name
        return out


def _num(where: str, value: Any, integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise InputError(f"{where}: expected a number >= 0, got {value!r}")
    if integer and int(value) != value:
        raise InputError(f"{where}: expected a whole number of bytes, got {value!r}")
    return value


def from_profile(app, table: dict[str, Any], fixed_bytes: int, where: str = "profile") -> CostModel:
    """The cost model of `app` from a profile's `primitives` mapping ({cnn: {layers,
    transitions}}); every layer of every CNN needs at least one measured primitive."""
    layers, options, edges, index = [], [], [], {}
    for cnn_name, cnn in app.cnns.items():
        if cnn_name not in table:
            raise InputError(f"{where}: key 'primitives' has no entry for CNN {cnn_name!r} "
                             "(run `explore profile APP --primitives`)")
        entry = table[cnn_name]
        if not isinstance(entry, dict) or not isinstance(entry.get("layers"), dict):
            raise InputError(f"{where}: primitives.{cnn_name} needs a mapping 'layers'")
        for layer in cnn.order():
            prims = entry["layers"].get(layer)
            key = f"{where}: primitives.{cnn_name}.layers.{layer}"
            if not isinstance(prims, dict) or not prims:
                raise InputError(f"{key}: expected measured primitives for this layer")
            opts = []
            for name, v in prims.items():
                if not isinstance(v, dict) or v.get("layout") not in ("nchw", "nchwc"):
                    raise InputError(f"{key}.{name}: expected ms, weight_bytes, workspace_bytes "
                                     "and layout nchw|nchwc")
                opts.append(Option(str(name), float(_num(f"{key}.{name}.ms", v.get("ms"))),
                                   int(_num(f"{key}.{name}.weight_bytes", v.get("weight_bytes"), True)),
                                   int(_num(f"{key}.{name}.workspace_bytes", v.get("workspace_bytes"), True)),
                                   v["layout"]))
            index[(cnn_name, layer)] = len(layers)
            layers.append((cnn_name, layer))
            options.append(opts)
        trans = entry.get("transitions", {}) or {}
        for src, dst in cnn.graph.edges:
            t = trans.get(edge_name(cnn_name, src, dst))
            u, v = index[(cnn_name, src)], index[(cnn_name, dst)]
            layouts = {o.layout for o in options[u] + options[v]}
            if len(layouts) == 1:
                edges.append(Edge(u, v))
                continue
            if not isinstance(t, dict):
                raise InputError(f"{where}: primitives.{cnn_name}.transitions has no entry for "
                                 f"edge {edge_name(cnn_name, src, dst)}")
            k = f"{where}: primitives.{cnn_name}.transitions.{edge_name(cnn_name, src, dst)}"
            edges.append(Edge(u, v, float(_num(f"{k}.to_nchwc_ms", t.get("to_nchwc_ms"))),
                              float(_num(f"{k}.to_nchw_ms", t.get("to_nchw_ms"))),
                              int(_num(f"{k}.to_nchwc_workspace_bytes", t.get("to_nchwc_workspace_bytes", 0), True)),
                              int(_num(f"{k}.to_nchw_workspace_bytes", t.get("to_nchw_workspace_bytes", 0), True))))
    return CostModel(list(app.cnns), layers, options, edges, int(fixed_bytes))

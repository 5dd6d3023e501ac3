"""The steps of a deployment's partitions as records (deploy/runtime/manifest_records.py
holds the rest of the manifest): what each step runs and the tensors it binds.
`from_dict` checks the types of what it reads (deploy/runtime/json_fields.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from deploy.runtime.json_fields import Fields
from sdf3.errors import InputError

Shape = tuple[int, ...]
BIND_KINDS = ("edge", "const", "frame", "output", "tile", "chained")


@dataclass(frozen=True)
class Binding:
    """One tensor a step binds. kind `edge`: port `name` viewing the edge copy of the
    frame's parity (`edges`: even, odd) from row `slot`, `shape` as stored; `const`: an
    int32 vector `values` (ring slot indices, row masks, counts); `frame`: the frame copied
    whole into the edges; `output`: rows `slot`.. of the CNN output of sink `layer`; `tile`:
    an edge a fused-tiled group reads or writes (its tile calls say where); `chained`: an
    edge a member of a chain step reads inside the call, from the output of the earlier
    member that wrote it (no port: recorded for the lifetime check). In a chain step
    (deploy/build/chains.py) every binding names its member's `layer`."""
    kind: str
    name: str | None = None
    edges: tuple[str, ...] = ()
    slot: int = 0
    shape: Shape = ()
    values: tuple[int, ...] = ()
    layer: str | None = None

    @property
    def writes(self) -> bool:
        """An edge binding the step writes (its port is an output)."""
        return self.kind == "edge" and str(self.name).startswith("out")

    def to_dict(self) -> dict[str, Any]:
        if self.kind in ("frame", "tile"):
            return {"kind": self.kind, "edges": list(self.edges)}
        if self.kind == "chained":
            return {"kind": self.kind, "edges": list(self.edges), "layer": self.layer}
        if self.kind == "const":
            return {"kind": self.kind, "name": self.name, "values": list(self.values)}
        if self.kind == "output":
            return {"kind": self.kind, "name": self.name, "layer": self.layer, "slot": self.slot,
                    "shape": list(self.shape)}
        out = {"kind": self.kind, "name": self.name, "edges": list(self.edges), "slot": self.slot,
               "shape": list(self.shape)}
        if self.layer is not None:       # an edge port of a chain step: its member
            out["layer"] = self.layer
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Binding:
        r = Fields(data, where)
        kind = r.str("kind")
        if kind not in BIND_KINDS:
            raise InputError(f"{where}: unknown binding kind {kind!r}")
        name = r.str("name") if kind in ("edge", "const", "output") else r.str("name", None)
        what = f"{where} ({name or kind})"
        r.where = what
        edges = r.strs("edges") if kind in ("edge", "frame", "tile", "chained") else ()
        if kind in ("edge", "frame", "tile", "chained") and len(edges) != 2:
            raise InputError(f"{what}: key 'edges' must name two edge copies, got {list(edges)!r}")
        placed = kind in ("edge", "output")           # a view: where it starts and its shape
        return cls(kind, name, edges, r.int("slot") if placed else 0,
                   r.ints("shape") if placed else (), r.ints("values") if kind == "const" else (),
                   r.str("layer") if kind in ("output", "chained") else r.str("layer", None))


@dataclass(frozen=True)
class TileMid:
    """An inner tensor of a tile: the edge copies it is written into, its tile's shape."""
    edges: tuple[str, ...]
    shape: Shape

    def to_dict(self) -> dict[str, Any]:
        return {"edges": list(self.edges), "shape": list(self.shape)}


@dataclass(frozen=True)
class TileCall:
    """One call of a fused-tiled group: tile (i, j), its model, the input region it slices
    ([row, column] starts and ends), its inner tensors and the output region
    (rows h0..h1, columns w0..w1) it pastes, `out_shape` the output tile's."""
    tile: tuple[int, int]
    model: str
    starts: tuple[int, int]
    ends: tuple[int, int]
    mids: tuple[TileMid, ...]
    region: tuple[int, int, int, int]
    out_shape: Shape

    def to_dict(self) -> dict[str, Any]:
        return {"tile": list(self.tile), "model": self.model, "starts": list(self.starts),
                "ends": list(self.ends), "mids": [m.to_dict() for m in self.mids],
                "region": list(self.region), "out_shape": list(self.out_shape)}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> TileCall:
        r = Fields(data, where)
        mids = []
        for k, m in enumerate(r.list("mids")):
            mr = Fields(m, f"{where}.mids[{k}]")
            mids.append(TileMid(mr.strs("edges"), mr.ints("shape")))
        call = cls(r.ints("tile"), r.str("model"), r.ints("starts"), r.ints("ends"), tuple(mids),
                   r.ints("region"), r.ints("out_shape"))
        sizes = (len(call.tile), len(call.starts), len(call.ends), len(call.region), len(call.out_shape))
        if sizes != (2, 2, 2, 4, 4) or any(len(m.edges) != 2 or len(m.shape) != 4 for m in mids):
            raise InputError(f"{where}: expected tile [i, j], starts and ends [row, column], region "
                             f"[h0, h1, w0, w1], 4-D shapes and two edge copies per inner tensor")
        return call


@dataclass(frozen=True)
class TiledGroup:
    """What a fused-tiled group's step adds: its layers, the grid, the input edge copies,
    the output edges' copies, the sink layer it writes (or None) and its tile calls."""
    layers: tuple[str, ...]
    grid: tuple[int, int]
    inputs: tuple[str, ...]
    outs: tuple[tuple[str, ...], ...]
    sink: str | None
    tiles: tuple[TileCall, ...]


@dataclass(frozen=True)
class Step:
    """One step of a partition: firing `phase` of `layer` (a band's first firing), its model
    (None: the Input's frame copy, or a tiled group's calls) and bindings. A region step lists
    the firings it computes (`region`, (layer, phase)) and each one's work; a tiled group's
    step carries `group`."""
    layer: str
    phase: int
    model: str | None
    bind: tuple[Binding, ...]
    primitive: str | None = None
    region: tuple[tuple[str, int], ...] | None = None
    work: tuple[int, ...] | None = None
    group: TiledGroup | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"layer": self.layer}
        g = self.group
        if g is not None:
            out.update(group=list(g.layers), grid=list(g.grid))
        out.update(phase=self.phase, model=self.model, bind=[b.to_dict() for b in self.bind])
        if g is not None:
            out.update({"in": list(g.inputs), "outs": [list(o) for o in g.outs], "sink": g.sink,
                        "tiles": [t.to_dict() for t in g.tiles]})
        if self.primitive is not None:
            out["primitive"] = self.primitive
        if self.region is not None:
            out["region"] = [[layer, p] for layer, p in self.region]
            out["work"] = list(self.work or ())
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Step:
        r = Fields(data, where)
        where = f"{where} ({r.raw('layer', None)})"
        r.where = where
        bind = tuple(Binding.from_dict(b, f"{where}.bind[{i}]") for i, b in enumerate(r.list("bind")))
        model = r.raw("model", None)
        if model is not None and not isinstance(model, str):
            raise InputError(f"{where}: key 'model' must be a path, got {model!r}")
        region = None
        if r.has("region"):
            pairs = r.list("region")
            if not all(isinstance(x, list) and len(x) == 2 and isinstance(x[0], str)
                       and isinstance(x[1], int) for x in pairs):
                raise InputError(f"{where}: key 'region' must list [layer, phase] pairs")
            region = tuple((x[0], x[1]) for x in pairs)
        group = None
        if r.has("tiles"):
            outs = r.list("outs")
            if not all(isinstance(o, list) and len(o) == 2 and all(isinstance(x, str) for x in o)
                       for o in outs) or len(r.strs("in")) != 2 or len(r.ints("grid")) != 2:
                raise InputError(f"{where}: keys 'in' and 'outs' must give two edge copies per "
                                 f"edge, 'grid' [n, m]")
            group = TiledGroup(r.strs("group"), r.ints("grid"), r.strs("in"),
                               tuple(tuple(o) for o in outs), r.str("sink", None),
                               tuple(TileCall.from_dict(t, f"{where}.tiles[{i}]")
                                     for i, t in enumerate(r.list("tiles"))))
        return cls(r.str("layer"), r.int("phase", 0), model, bind, r.str("primitive", None),
                   region, r.ints("work", None) if region is not None else None, group)


@dataclass(frozen=True)
class ManifestPartition:
    """A partition's resolved schedule: its CNN, the processor it runs on, its steps in order."""
    name: str
    cnn: str
    processor: str
    steps: tuple[Step, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "cnn": self.cnn, "processor": self.processor,
                "steps": [s.to_dict() for s in self.steps]}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> ManifestPartition:
        """`where`: the partitions' place in the file (the partition's name is added)."""
        r = Fields(data, where)
        where = f"{where}.{r.raw('name', '?')}"
        r.where = where
        steps = tuple(Step.from_dict(s, f"{where}.steps[{t}]") for t, s in enumerate(r.list("steps")))
        return cls(r.str("name"), r.str("cnn"), r.str("processor", "gpu"), steps)

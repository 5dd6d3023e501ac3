"""Group and tiling genes: the search chooses fused-tiled groups with the per-layer genes.

The chromosome is the per-layer genes of explorer.plan.genes (row parts) followed by one integer
gene per *block*: every chain of tileable layers in a partition (csdf.tiling.segments) is cut
into blocks after each layer that shrinks the map (csdf.tiling.blocks: MAFAT's cut
candidates, after the pools). A block's gene v in 0 .. len(GRIDS): 0 leaves its layers to
their per-layer genes, v > 0 tiles it GRIDS[v - 1] (N rows x M columns of tiles): v = 1 .. 7
is v x v, the following values the non-square grids N != M of 1 .. MAX_SIDE (strips 1 x 2,
2 x 1, ...); consecutive blocks of one chain with the same v form one group (MAFAT's
5x5/8/2x2 on YOLOv2-16 is blocks [0-1] [2-3] [4-7] = 5 and [8-11] [12-15] = 2; two
neighbouring groups with equal grids are not expressible). A grid that would leave a tile
empty is lowered, per axis, to the largest that fits. `TiledEvaluation` is a search problem
(explorer/search/problem.py) whose space gives the labels and ranges of the longer
chromosome, so the search (NSGA-II with its operators) runs unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from csdf.tiling import Group, blocks, grid, segments
from explorer.app.model import Application
from explorer.memory.cache import RunCache
from explorer.plan.derive import plan_for, whole_phases
from explorer.tiling.fused import Tilings, derive_tiled, fps as tiled_fps
from explorer.plan.genes import GeneSpace, gene_space
from explorer.plan.model import Plan

if TYPE_CHECKING:
    from explorer.throughput.evaluator import Evaluator

MAX_TILES = 7
MAX_SIDE = 4     # non-square grids: N, M in 1 .. MAX_SIDE
GRIDS: tuple[tuple[int, int], ...] = (
    tuple((v, v) for v in range(1, MAX_TILES + 1))
    + tuple((n, m) for n in range(1, MAX_SIDE + 1) for m in range(1, MAX_SIDE + 1) if n != m))
MODES = ("parts", "tiles", "both")


@dataclass(frozen=True)
class Slot:
    """One block's genes: CNN, the chain it belongs to (index) and its layers."""

    cnn: str
    chain: int
    layers: tuple[str, ...]


def tile_slots(app: Application) -> list[Slot]:
    """Blocks of every tileable chain, partition by partition in the app's order."""
    out: list[Slot] = []
    chain = 0
    for part in app.partitions:
        cnn = app.cnns[part.cnn]
        for seg in segments(cnn, part.layers):
            for blk in blocks(cnn, seg):
                out.append(Slot(part.cnn, chain, tuple(blk)))
            chain += 1
    return out


def slot_labels(slots: list[Slot]) -> list[str]:
    return [f"{s.cnn}.{s.layers[0]}..{s.layers[-1]}:tiles" for s in slots]


def _fit_axis(size: int, v: int) -> int:
    """The largest count <= v of DeepThings' grid on `size` that leaves no tile empty."""
    for n in range(min(v, size), 0, -1):
        try:
            grid(size, n)
            return n
        except ValueError:
            continue
    return 1


def _fit(cnn, layers: tuple[str, ...], n: int, m: int) -> tuple[int, int]:
    """The grid (rows, columns of tiles) <= n x m that leaves no tile empty on the group's
    output; a square grid stays square."""
    h, w = (int(x) for x in cnn.layer(layers[-1]).output_shape[2:])
    if n != m:
        return _fit_axis(h, n), _fit_axis(w, m)
    for side in range(min(n, h, w), 0, -1):
        try:
            grid(h, side), grid(w, side)
            return side, side
        except ValueError:
            continue
    return 1, 1


def decode(app: Application, values, slots: list[Slot]) -> Tilings:
    """Tilings of a chromosome's block genes (module doc)."""
    values = [int(v) for v in values]
    if len(values) != len(slots):
        raise ValueError(f"expected {len(slots)} tiling genes, got {len(values)}")
    out: Tilings = {}
    run: list[str] = []
    for k, (slot, v) in enumerate(zip(slots, values)):
        if not 0 <= v <= len(GRIDS):
            raise ValueError(f"tiling gene of {slot.layers[0]}: {v} is outside 0..{len(GRIDS)}")
        run.extend(slot.layers)
        if k + 1 < len(slots) and slots[k + 1].chain == slot.chain and values[k + 1] == v:
            continue
        if v > 0:
            n, m = _fit(app.cnns[slot.cnn], tuple(run), *GRIDS[v - 1])
            out.setdefault(slot.cnn, []).append(Group(tuple(run), n, m))
        run = []
    return out


@dataclass(frozen=True)
class TiledSpace:
    """Layer genes then tiling genes, as a search space (explorer.search.problem.Space): one
    plain NSGA-II, never staged, with no seeds of its own."""

    layer: GeneSpace | None
    slots: tuple[Slot, ...]

    @property
    def labels(self) -> list[str]:
        return (self.layer.labels if self.layer else []) + slot_labels(list(self.slots))

    @property
    def upper(self) -> list[int]:
        return (self.layer.upper if self.layer else []) + [len(GRIDS)] * len(self.slots)

    @property
    def staged(self) -> bool:
        return False

    def seeds(self) -> list[tuple[int, ...]]:
        return []

    def binary(self, bits) -> tuple[int, ...]:
        """0 stays 0, 1 becomes the gene's largest value."""
        return tuple(top if b else 0 for b, top in zip(bits, self.upper))


@dataclass
class TiledEvaluation:
    """The search problem (explorer.search.problem.Problem) over layer genes + tiling genes:
    evaluate(genes) -> (memory_bytes, {cnn: fps}), the derivation and the plan of a chromosome.
    `mode` "parts": layer genes only (no tiling); "tiles": tiling genes only (every layer
    outside a group whole); "both": the two together."""

    app: Application
    evaluator: Evaluator                       # .fps, .tables
    mode: str = "both"
    granularity: str = "binary"
    space: TiledSpace | None = None
    cache: RunCache = field(default_factory=RunCache)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode: expected one of {MODES}, got {self.mode!r}")
        layer = None if self.mode == "tiles" else gene_space(self.app, self.granularity)
        slots = () if self.mode == "parts" else tuple(tile_slots(self.app))
        self.space = TiledSpace(layer, slots)
        self._whole = whole_phases(self.app)
        # measured per-layer tables: their runtime bytes count in the memory
        # (explorer/throughput/runtime_costs.py)
        self.workspace = dict(self.evaluator.tables) or None

    @property
    def slots(self) -> list[Slot]:
        return list(self.space.slots)

    @property
    def labels(self) -> list[str]:
        return self.space.labels

    def split(self, genes) -> tuple[list[int], list[int]]:
        genes = [int(g) for g in genes]
        n = len(self.space.layer.layers) if self.space.layer else 0
        return genes[:n], genes[n:]

    def tilings(self, genes) -> Tilings:
        return decode(self.app, self.split(genes)[1], self.slots)

    def derive_tilings(self, genes):
        """(the derivation, the tilings) of a chromosome."""
        layer, tiles = self.split(genes)
        phases = self.space.layer.decode(layer, self._whole) if self.space.layer else self._whole
        tilings = decode(self.app, tiles, self.slots)
        return derive_tiled(self.app, phases, tilings, self.cache, self.workspace), tilings

    def derive(self, genes):
        return self.derive_tilings(genes)[0]

    def plan(self, genes, fps: dict[str, float], met: bool) -> Plan:
        return plan_tiled(self.app, self, genes, fps, met)

    def __call__(self, genes) -> tuple[int, dict[str, float]]:
        d, tilings = self.derive_tilings(genes)
        return d.memory_bytes, tiled_fps(self.evaluator, d.phases, tilings)


def plan_tiled(app: Application, evaluate: TiledEvaluation, genes, fps: dict[str, float],
               met: bool) -> Plan:
    """plan.json of a chromosome: explorer.plan.derive.plan_for + the `tilings` key."""
    d, tilings = evaluate.derive_tilings(genes)
    plan = plan_for(app, d, fps, met, list(genes))
    return replace(plan, tilings={c: tuple(gs) for c, gs in tilings.items() if gs})

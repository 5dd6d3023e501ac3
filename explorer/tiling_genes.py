"""Group and tiling genes: the search chooses fused-tiled groups with the per-layer genes.

The chromosome is the per-layer genes of explorer.derive (row parts) followed by BITS binary
genes per *block*: every chain of tileable layers in a partition (csdf.tiling.segments) is cut
into blocks after each layer that shrinks the map (csdf.tiling.blocks: MAFAT's cut candidates,
after the pools). A block's bits read as v in 0 .. 2^BITS - 1: 0 leaves its layers to their
per-layer genes, v > 0 tiles it v x v; consecutive blocks of one chain with the same v form
one group (so MAFAT's 5x5/8/2x2 on YOLOv2-16 is blocks [0-1] [2-3] [4-7] = 5 and [8-11]
[12-15] = 2). A grid that would leave a tile empty is lowered to the largest that fits.
Binary genes keep DEAP's operators of explorer.search (two-point crossover, one-gene flip)
unchanged; NSGA-II (explorer.search.nsga2) runs over the longer chromosome.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from csdf.tiling import Group, blocks, grid, segments
from explorer.app import Application, SearchSettings
from explorer.derive import ViewCache, gene_labels, gene_layers, phases_of, plan_for
from explorer.fused import Tilings, derive_tiled, fps as tiled_fps, tilings_json
from explorer.pick import Point
from explorer.plan import Plan

BITS = 3
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
    return [f"{s.cnn}.{s.layers[0]}..{s.layers[-1]}:tile{b}" for s in slots for b in range(BITS)]


def _fit(cnn, layers: tuple[str, ...], v: int) -> int:
    """The largest grid <= v that leaves no tile empty on the group's output."""
    h, w = (int(x) for x in cnn.layer(layers[-1]).output_shape[2:])
    for n in range(min(v, h, w), 0, -1):
        try:
            grid(h, n), grid(w, n)
            return n
        except ValueError:
            continue
    return 1


def decode(app: Application, bits: tuple[int, ...] | list[int], slots: list[Slot]) -> Tilings:
    """Tilings of a chromosome's block bits (module doc)."""
    if len(bits) != BITS * len(slots):
        raise ValueError(f"expected {BITS * len(slots)} tiling genes, got {len(bits)}")
    values = [int("".join(str(int(b)) for b in bits[BITS * k: BITS * (k + 1)]), 2) for k in range(len(slots))]
    out: Tilings = {}
    run: list[str] = []
    for k, (slot, v) in enumerate(zip(slots, values)):
        run.extend(slot.layers)
        nxt = k + 1 < len(slots) and slots[k + 1].chain == slot.chain and values[k + 1] == v
        if nxt:
            continue
        if v > 0:
            n = _fit(app.cnns[slot.cnn], tuple(run), v)
            out.setdefault(slot.cnn, []).append(Group(tuple(run), n, n))
        run = []
    return out


def encode(slots: list[Slot], values: list[int]) -> list[int]:
    """Block values -> bits (for tests and fixed configurations such as MAFAT's)."""
    return [int(c) for v in values for c in format(v, f"0{BITS}b")]


@dataclass
class TiledEvaluation:
    """evaluate(genes) -> (memory_bytes, {cnn: fps}) over layer genes + tiling bits.
    `mode` "parts" fixes the tiling bits to 0, "tiles" the layer genes to 0."""

    app: Application
    evaluator: Any
    mode: str = "both"
    where: list = field(default_factory=list)
    slots: list[Slot] = field(default_factory=list)
    cache: ViewCache = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode: expected one of {MODES}")
        self.where = gene_layers(self.app)
        self.slots = tile_slots(self.app)

    @property
    def labels(self) -> list[str]:
        return ([] if self.mode == "tiles" else gene_labels(self.app)) + \
            ([] if self.mode == "parts" else slot_labels(self.slots))

    def split(self, genes) -> tuple[list[int], list[int]]:
        genes = list(genes)
        n = 0 if self.mode == "tiles" else len(self.where)
        layer = genes[:n] if n else [0] * len(self.where)
        bits = genes[n:] if self.mode != "parts" else [0] * (BITS * len(self.slots))
        return layer, bits

    def tilings(self, genes) -> Tilings:
        return decode(self.app, self.split(genes)[1], self.slots)

    def derive(self, genes):
        layer, bits = self.split(genes)
        phases = phases_of(self.app, layer, self.where)
        tilings = decode(self.app, bits, self.slots)
        return derive_tiled(self.app, phases, tilings, self.cache), tilings

    def __call__(self, genes) -> tuple[int, dict[str, float]]:
        d, tilings = self.derive(genes)
        return d.memory_bytes, tiled_fps(self.evaluator, d.phases, tilings)


@dataclass
class TiledOutcome:
    front: list[Point]
    chosen: Point
    met: bool
    result: Any
    genes: list[str]


def algorithm2_tiled(app: Application, evaluate: TiledEvaluation,
                     settings: SearchSettings | None = None, progress=None) -> TiledOutcome:
    """explorer.search.algorithm2 over the longer chromosome: early exit when nothing by
    parts or tiled meets M^c, else NSGA-II, then the paper's pick."""
    from explorer.pick import pick
    from explorer.search import SearchResult, nsga2

    settings = settings or app.search
    labels = evaluate.labels
    cnns = list(app.cnns)
    start = time.perf_counter()
    zeros = (0,) * len(labels)
    mem, fps = evaluate(zeros)
    base = Point(zeros, int(mem), {c: float(fps.get(c, 0.0)) for c in cnns})
    if app.memory is None or base.memory_bytes <= app.memory or not labels:
        result = SearchResult([base], evaluations=1, unique=1,
                              seconds=time.perf_counter() - start, early_exit=True)
    else:
        result = nsga2(len(labels), cnns, evaluate, settings, progress)
    chosen, met = pick(result.front, app.memory, app.fps)
    return TiledOutcome(result.front, chosen, met, result, labels)


def plan_tiled(app: Application, evaluate: TiledEvaluation, genes, fps: dict[str, float],
               met: bool) -> Plan:
    """plan.json of a chromosome: explorer.derive.plan_for + the `tilings` key."""
    d, tilings = evaluate.derive(genes)
    plan = plan_for(app, d, fps, met, list(genes))
    plan.tilings = tilings_json(tilings)
    return plan

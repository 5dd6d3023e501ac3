"""The application: CNNs, partitions, pipeline sets J, precision and constraints.

Types only; `explorer.app.appfile` reads them from YAML and validates.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from csdf.model import CNN


@dataclass(frozen=True)
class Precision:
    name: str          # fp32 | fp16 | mixed | int8
    data_bytes: int
    par_bytes: int


PRECISIONS = {
    "fp32": Precision("fp32", 4, 4),
    "fp16": Precision("fp16", 2, 2),
    "mixed": Precision("mixed", 2, 1),   # fp16 data, int8 parameters (paper Table 3)
    "int8": Precision("int8", 1, 1),
}


@dataclass
class Partition:
    """A contiguous range of a CNN's layers (topological order) on one processor."""
    name: str                  # qualified: "cnn.partition"; the default is "cnn.all"
    cnn: str
    layers: list[str]
    processor: str = "gpu"


GRANULARITIES = ("ladder", "binary")   # gene kinds (explorer/plan/genes.py)
PREFER = ("memory", "fps")              # rules picking a point of the front (explorer/search/pick.py)
EFFORTS = ("auto", "full")              # search effort (explorer/search/effort.py)


@dataclass
class SearchSettings:
    population: int = 100
    generations: int = 60
    crossover: float = 0.7
    mutation: float = 0.2
    seed: int = 1
    granularity: str = "ladder"      # explorer.plan.genes: "ladder" (rows per phase) or "binary"
    relink_rounds: int = 16          # path relinking rounds after a ladder search (fewer when
                                     # a round adds nothing)
    local_rounds: int = 1            # then Pareto local search rounds (toward whole)
    workers: int = 0                 # processes evaluating (explorer.search.parallel); 0 = one per CPU
    time_limit: float | None = None  # seconds for the whole search (explorer/search/deadline.py)
    cluster: str | None = None       # a Dask scheduler's address (explorer/search/cluster.py)
    effort: str = "auto"             # "auto": defaults fitted to the network (explorer/search/effort.py); "full"
    fixed: tuple[str, ...] = ()      # population / generations / relink_rounds the user set
    # chromosomes path relinking (both passes together) and local search may each evaluate:
    # set by explorer/search/effort.py (a neighbourhood of a large front grows with the genes)
    stage_evaluations: int | None = None


@dataclass
class Application:
    name: str
    cnns: dict[str, CNN]
    partitions: list[Partition]
    pipelines: list[list[str]]          # J: every partition in exactly one set (singletons added)
    precision: Precision = PRECISIONS["fp32"]
    # `precision: auto`: the precisions the search may give each layer
    # (explorer/app/layer_precision.py LADDER); `precision` is then fp32, the reference and
    # the precision of a layer given none. Empty: every layer at `precision`
    precisions: tuple[str, ...] = ()
    min_sqnr_db: float | None = None    # the output's SQNR against fp32 a plan must keep (auto)
    platform: str = "jetson-tx2"        # a profile name or file, or "cpu": this machine
    memory: int | None = None           # M^c in bytes; None = no constraint
    fps: dict[str, float] = field(default_factory=dict)   # T^c per CNN (0 = none)
    # which point of the front to pick (explorer.search.pick): "memory", "fps", None = by the
    # constraints given (the fastest within M^c when M^c is the only one)
    prefer: str | None = None
    schedules: dict[str, list[str]] = field(default_factory=dict)  # explicit, per partition
    search: SearchSettings = field(default_factory=SearchSettings)
    path: Path | None = None
    # buffer placement: a planner's name in explorer.memory.placement's registry, asked what
    # it does (at offsets, per tensor, reordering); the default places at offsets, reorders
    # layers and picks phase schedules for total memory
    placement: str = "offsets"
    threads: int = 1                    # ONNX Runtime intra-op threads of platform cpu
    # an app given as a mapping (memtrade.load_app): that mapping, model paths made absolute
    document: dict | None = None

    def partition(self, name: str) -> Partition:
        for p in self.partitions:
            if p.name == name:
                return p
        raise KeyError(name)

    def partitions_of(self, cnn: str) -> list[Partition]:
        return [p for p in self.partitions if p.cnn == cnn]

    def pipeline_of(self, partition: str) -> list[str]:
        for group in self.pipelines:
            if partition in group:
                return group
        return [partition]

    def pipelines_frames(self, cnn: str) -> bool:
        """Whether `cnn`'s partitions run as pipeline stages, two frames in flight: more than
        one, all in one pipeline set (deploy/runtime/executor.py's rule; its outputs and the
        bindings of its crossing tensors then come per frame parity)."""
        names = {p.name for p in self.partitions_of(cnn)}
        return len(names) > 1 and sum(1 for g in self.pipelines if set(g) & names) == 1

"""Results of the CNN-side analyses kept for reuse: an object the owner of a run creates
and passes to the functions that can use it (csdf.to_csdf.edge_windows and channel_rates,
csdf.partition_analysis.analyse_partition and first_reads). Every function also runs
without one and then computes afresh; a cache only saves time, never changes an answer.

What is kept, per CNN object (`AnalysisCache.of`), is emptied when the CNN's graph gains or
loses a layer or an edge (CNN graphs are built by `CNN.add_layer` and read-only after), and
the keys hold everything else an answer depends on (edge shapes, phase counts, layers).
A copy pickled to another process starts empty: the keys hold object identities.
"""
from __future__ import annotations

from typing import Any, Generic, Hashable, TypeVar

from csdf.model import CNN

V = TypeVar("V")
T = TypeVar("T")


class Recent(Generic[V]):
    """A dict that keeps at most `limit` entries, dropping the oldest first (None: no limit)."""

    def __init__(self, limit: int | None = None):
        self.limit = limit
        self.items: dict[Hashable, V] = {}

    def get(self, key: Hashable) -> V | None:
        return self.items.get(key)

    def put(self, key: Hashable, value: V) -> V:
        items = self.items
        items[key] = value
        if self.limit is not None and len(items) > self.limit:
            del items[next(iter(items))]
        return value

    def __contains__(self, key: Hashable) -> bool:
        return key in self.items

    def __len__(self) -> int:
        return len(self.items)

    def clear(self) -> None:
        self.items.clear()

    def __getstate__(self) -> dict:
        return {"limit": self.limit, "items": {}}


def graph_stamp(cnn: CNN) -> tuple[int, int]:
    """(layers, edges) of the CNN's graph: what changes when a layer is added or removed."""
    return len(cnn.graph), len(cnn.graph.edges)     # len(edges): a third of number_of_edges' time


class PerCNN(Generic[T]):
    """One `make(*args)` per CNN object, made afresh when its graph changed (`graph_stamp`).
    Entries hold their CNN, so an id in the keys is never another CNN's."""

    def __init__(self, make: type[T], *args: Any):
        self.make, self.args = make, args
        self.kept: dict[int, tuple[CNN, tuple[int, int], T]] = {}

    def of(self, cnn: CNN) -> T:
        hit = self.kept.get(id(cnn))
        stamp = graph_stamp(cnn)
        if hit is None or hit[0] is not cnn or hit[1] != stamp:
            hit = self.kept[id(cnn)] = (cnn, stamp, self.make(*self.args))
        return hit[2]

    def clear(self) -> None:
        self.kept.clear()

    def __getstate__(self) -> dict:
        return {"make": self.make, "args": self.args, "kept": {}}


class CNNAnalyses:
    """What is kept for one CNN (see the module docstring for the keys)."""

    def __init__(self, analyses: int | None = None):
        # (src, dst, consumer phases, edge shape, consumer shape) -> rows each phase reads
        self.windows: dict[tuple, list[range]] = {}
        # (src, dst, producer phases, consumer phases) -> (reads, prod, cons, token size)
        self.rates: dict[tuple, tuple] = {}
        # (layers, phases) -> csdf.partition_analysis.PartitionAnalysis
        self.analyses: Recent[Any] = Recent(analyses)


class AnalysisCache:
    """Per-CNN analyses (`of`) and the first-read tables of `first_reads`, by windows list.
    `analyses`: how many full partition analyses to keep per CNN (the oldest go first); a
    search keeps its smaller per-partition views instead and asks for few."""

    FIRST_READS = 8192          # windows lists whose first-read tables are kept

    def __init__(self, analyses: int | None = None):
        self.cnns: PerCNN[CNNAnalyses] = PerCNN(CNNAnalyses, analyses)
        # id(windows) -> (windows, table): the entry holds the list, so its id is not reused
        self.first_reads: dict[int, tuple[list[range], list[int]]] = {}

    def of(self, cnn: CNN) -> CNNAnalyses:
        """What is kept for `cnn`, emptied first if its graph changed since."""
        return self.cnns.of(cnn)

    def clear(self) -> None:
        self.cnns.clear()
        self.first_reads.clear()

    def __getstate__(self) -> dict:
        return {"cnns": self.cnns, "first_reads": {}}

"""The search problem: what Algorithm 2 needs of the thing it searches, in one interface
(as a pymoo `Problem`: the variables' bounds, an evaluation, and here also the plan of a
chosen point).

A problem has a gene space (`Space`: each gene's largest value, its label, the chromosomes
the search starts from, and whether the paper's binary search runs first) and evaluates a
chromosome to (memory_bytes, {cnn: fps}); `derive` and `plan` turn the chosen chromosome
into its derivation and the plan.json that `explore` writes. Layer genes
(explorer.plan.derive.Evaluation) and layer + fused-tile genes
(explorer.tiling.genes.TiledEvaluation) implement it; explorer.search.algorithm2 and
memtrade/exploration.py use nothing else of them.

`Batch` is an evaluation over many chromosomes at once (explorer.search.parallel's pool,
explorer.search.cluster's client, or `Serial`, one after another in this process): NSGA-II
and the last stages hand each step's new chromosomes over as one batch.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence, runtime_checkable

Key = tuple[int, ...]
Result = tuple[int, dict[str, float]]
Evaluate = Callable[[Key], Result]


class Space(Protocol):
    """The genes of a problem: gene i takes the values 0 .. upper[i]; all zeros is reuse only."""

    @property
    def upper(self) -> list[int]: ...

    @property
    def labels(self) -> list[str]: ...

    @property
    def staged(self) -> bool:
        """The paper's binary search runs first and seeds this one
        (explorer.search.staged.ladder_search)."""
        ...

    def seeds(self) -> list[Key]:
        """Chromosomes the search's initial population holds besides all-zeros and all-upper."""
        ...

    def binary(self, bits) -> Key:
        """A binary chromosome (0 whole, 1 row by row) as a chromosome of this space."""
        ...


class Problem(Protocol):
    """What the search and `explore` need of a problem (module doc)."""

    app: Any                                   # explorer.app.model.Application

    @property
    def space(self) -> Space: ...

    def __call__(self, genes: Key) -> Result: ...

    def derive(self, genes: Key) -> Any:
        """The derivation of a chromosome (explorer.plan.derive.Derived)."""
        ...

    def plan(self, genes: Key, fps: dict[str, float], met: bool) -> Any:
        """The plan.json of a chromosome (explorer.plan.model.Plan)."""
        ...


@runtime_checkable
class Batch(Protocol):
    def __call__(self, genes: Key) -> Result: ...

    def many(self, keys: Sequence[Key]) -> list[Result]: ...


class Serial:
    """A one-chromosome evaluation as a `Batch`: the batch evaluated in order, here."""

    def __init__(self, evaluate: Evaluate):
        self.evaluate = evaluate

    def __call__(self, genes: Key) -> Result:
        return self.evaluate(genes)

    def many(self, keys: Sequence[Key]) -> list[Result]:
        return [self.evaluate(k) for k in keys]


def as_batch(evaluate: Evaluate | Batch) -> Batch:
    """`evaluate` itself when it evaluates batches, else `Serial(evaluate)`."""
    return evaluate if isinstance(evaluate, Batch) else Serial(evaluate)

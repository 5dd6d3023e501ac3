"""Precision genes (`precision: auto`): one more gene per layer, its precision, beside the
granularity genes of explorer/plan/genes.py, and the search problem over both.

A chromosome is the granularity genes followed by one precision gene per layer the
sensitivity tables have rows for (explorer/plan/sensitivity.py: layers whose output a
deployment stores as floats), CNN by CNN in topological order; a gene is an index into
LADDER (0 fp32, 1 fp16, 2 int8), so all zeros is still the reuse-only plan at fp32. The
paper's binary stage (explorer/search/staged.py) reads a binary precision gene as fp32 (0) or
int8 (1).

The SQNR constraint (`min_sqnr_db`) is kept by repair (Salcedo-Sanz, "A survey of repair
methods used as constraint handling techniques in evolutionary algorithms", Computer Science
Review 3(3), 2009): a chromosome whose estimated SQNR (explorer/plan/sensitivity.py
`estimate_db`) falls below it has, one step at a time, the stored tensor of largest noise
raised one rung toward fp32 (a CNN input's noise by raising its widest readers), until each
CNN's estimate meets the constraint. Every chromosome then decodes to a plan that meets it,
so the front is memory x fps under it. The repair is deterministic and kept by precision
genes. fps are predicted with each layer at its precision (explorer/throughput/evaluator.py:
the roofline at that precision's peak and bytes, a measured table times the profile's
speedup for it). The estimate can be above what the plan's rounding measures; `explore`
then raises the floor the repair uses and evaluates the front again (memtrade/sensitivity.py
`checked`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping

from explorer.app.layer_precision import LADDER, LayerPrecisions
from explorer.plan.derive import Derived, Evaluation, Phases, derive, plan_for
from explorer.plan.genes import GeneSpace
from explorer.plan.model import Plan
from explorer.plan.sensitivity import Sensitivity, estimate_db, noise_power

INT8 = LADDER.index("int8")


@dataclass(frozen=True)
class PrecisionSpace:
    """Granularity genes (`base`) then one precision gene per layer of `layers`."""
    base: GeneSpace
    layers: tuple[tuple[str, str], ...]

    @property
    def upper(self) -> list[int]:
        return list(self.base.upper) + [len(LADDER) - 1] * len(self.layers)

    @property
    def labels(self) -> list[str]:
        return list(self.base.labels) + [f"{c}.{l}:precision" for c, l in self.layers]

    @property
    def staged(self) -> bool:
        return self.base.staged

    def split(self, genes) -> tuple[tuple[int, ...], tuple[int, ...]]:
        n = len(self.base.layers)
        genes = tuple(int(g) for g in genes)
        if len(genes) != n + len(self.layers):
            raise ValueError(f"expected {n + len(self.layers)} genes, got {len(genes)}")
        return genes[:n], genes[n:]

    def binary(self, bits) -> tuple[int, ...]:
        n = len(self.base.layers)
        bits = list(bits)
        return tuple(self.base.binary(bits[:n])) + tuple(INT8 if b else 0 for b in bits[n:])

    def seeds(self) -> list[tuple[int, ...]]:
        """The granularity seeds at fp32, and whole and row-by-row layers with every layer
        at each lower precision."""
        none = (0,) * len(self.layers)
        out = [tuple(g) + none for g in self.base.seeds()]
        for k in range(1, len(LADDER)):
            every = (k,) * len(self.layers)
            out += [self.base.whole() + every, self.base.row_by_row() + every]
        return list(dict.fromkeys(out))

    def precisions(self, genes: tuple[int, ...]) -> LayerPrecisions:
        by_cnn: dict[str, dict[str, str]] = {}
        for (cnn, layer), g in zip(self.layers, genes):
            by_cnn.setdefault(cnn, {})[layer] = LADDER[g]
        return LayerPrecisions.of(by_cnn)


def precision_space(base: GeneSpace, app, tables: Mapping[str, Sensitivity]) -> PrecisionSpace:
    """The space of `app` with a precision gene for every non-input layer with table rows."""
    layers = []
    for name, cnn in app.cnns.items():
        rows = set(tables[name].layers())
        layers += [(name, l) for l in cnn.order() if l in rows and l not in _inputs(cnn)]
    return PrecisionSpace(base, tuple(layers))


def _inputs(cnn) -> set[str]:
    from csdf.model import INPUT
    return {l.name for l in cnn.layers() if l.op == INPUT}


def repaired(app, space: PrecisionSpace, tables: Mapping[str, Sensitivity],
             genes: tuple[int, ...], margin: float = 0.0) -> tuple[int, ...]:
    """Precision genes raised until every CNN's estimated SQNR meets `app.min_sqnr_db` plus
    `margin` dB (module docstring); unchanged without the constraint."""
    if app.min_sqnr_db is None:
        return genes
    floor = app.min_sqnr_db + margin
    genes = list(genes)
    index = {key: i for i, key in enumerate(space.layers)}
    while True:
        layers = space.precisions(tuple(genes))
        worst = None
        for cnn, graph in app.cnns.items():
            if estimate_db(tables[cnn], graph, cnn, layers) >= floor:
                continue
            for name in graph.order():
                prec = layers.tensor(graph, cnn, name).name
                readers = ([(cnn, name)] if name not in _inputs(graph) else
                           [(cnn, d) for d in graph.graph.successors(name)
                            if layers.name(cnn, d) == prec])
                raise_ = [index[r] for r in readers if r in index and genes[index[r]] > 0]
                if not raise_:
                    continue
                sqnr = tables[cnn].sqnr_db(name, prec)
                noise = noise_power(math.inf if sqnr is None else sqnr)
                if worst is None or noise > worst[0]:
                    worst = (noise, raise_)
        if worst is None:
            return tuple(genes)        # met, or nothing left to raise (all fp32)
        for i in worst[1]:
            genes[i] -= 1


class PrecisionEvaluation:
    """Layer genes plus precision genes (explorer/search/problem.py's Problem): memory at each
    layer's bytes, under the SQNR constraint by repair; the granularity genes are decoded by
    the layer-genes problem it holds (explorer.plan.derive.Evaluation)."""

    def __init__(self, app, evaluator, base: GeneSpace, tables: Mapping[str, Sensitivity]):
        self.inner = Evaluation(app, evaluator, space=base)
        self.app, self.evaluator, self.tables = app, evaluator, dict(tables)
        self.space = precision_space(base, app, self.tables)
        self.margin = 0.0           # dB the repair asks beyond min_sqnr_db (`tighten`)
        self._repairs: dict[tuple[int, ...], tuple[int, ...]] = {}

    def tighten(self, margin: float) -> None:
        """Repair to `margin` dB above min_sqnr_db from now on (memtrade/sensitivity.py
        `checked`: when a plan's measured SQNR falls short of its estimate)."""
        self.margin = float(margin)
        self._repairs.clear()

    def layers(self, genes) -> LayerPrecisions:
        """The precisions of `genes`, repaired to meet the SQNR constraint."""
        _, chosen = self.space.split(genes)
        fixed = self._repairs.get(chosen)
        if fixed is None:
            fixed = self._repairs[chosen] = repaired(self.app, self.space, self.tables, chosen,
                                                     self.margin)
        return self.space.precisions(fixed)

    def phases(self, genes) -> Phases:
        return self.inner.phases(self.space.split(genes)[0])

    def __call__(self, genes: tuple[int, ...]) -> tuple[int, dict[str, float]]:
        phases = self.phases(genes)
        return self.derive(genes).memory_bytes, self.evaluator.fps(phases, self.layers(genes))

    def derive(self, genes) -> Derived:
        layers = self.layers(genes)
        workspace = (None if self.inner.workspace is None else     # each layer's own precision's
                     self.evaluator.tables_for(layers))
        return derive(self.app, self.phases(genes), self.inner.cache, workspace, layers)

    def plan(self, genes, fps: dict[str, float], met: bool) -> Plan:
        """The plan of `genes`, with its precisions and their estimated SQNR per CNN."""
        return replace(plan_for(self.app, self.derive(genes), fps, met, genes),
                       sqnr_estimate_db=self.estimates(genes))

    def least_param_bytes(self) -> int:
        """The weights with every precision gene at its fewest bytes (int8): no plan holds less."""
        every = self.space.precisions((len(LADDER) - 1,) * len(self.space.layers))
        return every.param_bytes(self.app.cnns)

    def estimates(self, genes) -> dict[str, float]:
        """Each CNN's estimated SQNR (dB) with the (repaired) precisions of `genes`."""
        layers = self.layers(genes)
        return {c: estimate_db(self.tables[c], g, c, layers) for c, g in self.app.cnns.items()}

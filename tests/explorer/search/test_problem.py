"""The search problem (explorer/search/problem.py): layer genes and layer + tile genes
implement it, Algorithm 2 runs on any implementation, and `explore` builds one per mode."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest

from explorer.app.appfile import load_app
from explorer.app.model import SearchSettings
from memtrade.problem import problem_for
from explorer.plan.derive import Evaluation, derive, phases_of, plan_for
from explorer.plan.genes import gene_space
from explorer.search.algorithm2 import algorithm2
from explorer.search.problem import Serial, as_batch
from explorer.throughput.evaluator import make_evaluator
from explorer.tiling.genes import TiledEvaluation, plan_tiled
from explorer.tiling.search import combined_search


@pytest.fixture(scope="module")
def vgg(tmp_path_factory):
    path = tmp_path_factory.mktemp("vgg") / "app.yaml"
    path.write_text("name: vgg\ncnns:\n  - {name: n, model: 'zoo:vgg_small'}\n")
    return load_app(path, mem="0")


def test_layer_genes_without_a_space_are_equation_6(vgg):
    """An Evaluation given no space searches the paper's binary genes: its space is the
    two-rung ladder and a chromosome's memory is that of Equation 6's phases."""
    ev = Evaluation(vgg, make_evaluator(vgg))
    assert ev.space == gene_space(vgg, "binary") and not ev.space.staged
    assert ev.space.upper == [1] * len(ev.where) and ev.space.seeds() == []
    genes = tuple(i % 2 for i in range(len(ev.where)))
    assert ev(genes)[0] == derive(vgg, phases_of(vgg, genes)).memory_bytes


def test_the_problems_plan_is_the_plan_of_its_derivation(vgg):
    evaluator = make_evaluator(vgg)
    ev = Evaluation(vgg, evaluator, space=gene_space(vgg, "ladder"))
    genes = tuple(min(1, u) for u in ev.space.upper)
    memory, fps = ev(genes)
    assert ev.derive(genes).memory_bytes == memory
    assert ev.plan(genes, fps, False) == plan_for(vgg, derive(vgg, ev.phases(genes)), fps, False, genes)
    tiled = TiledEvaluation(vgg, evaluator, "tiles")
    genes = (2,) * len(tiled.space.upper)
    memory, fps = tiled(genes)
    assert tiled.derive(genes).memory_bytes == memory
    assert tiled.plan(genes, fps, True) == plan_tiled(vgg, tiled, genes, fps, True)
    assert not tiled.space.staged and tiled.space.seeds() == []
    assert tiled.space.binary((1, 0)) == (tiled.space.upper[0], 0)


def test_explore_builds_one_problem_per_mode(vgg):
    evaluator = make_evaluator(vgg)
    settings = SearchSettings(granularity="ladder")
    problem, search = problem_for(vgg, evaluator, settings, None)
    assert isinstance(problem, Evaluation) and problem.space.staged and search is algorithm2
    for mode, expected in (("parts", algorithm2), ("tiles", algorithm2), ("both", combined_search)):
        problem, search = problem_for(vgg, evaluator, settings, mode)
        assert isinstance(problem, TiledEvaluation) and problem.mode == mode
        assert search is expected


def test_serial_batches_answer_in_order():
    square = Serial(lambda g: (g[0] ** 2, {}))
    assert [m for m, _ in square.many([(3,), (1,), (2,)])] == [9, 1, 4]
    assert as_batch(square) is square
    assert [m for m, _ in as_batch(lambda g: (g[0] + 1, {})).many([(1,), (5,)])] == [2, 6]


@dataclass
class ToySpace:
    upper: list[int]
    labels: list[str] = field(default_factory=list)
    staged: bool = False

    def seeds(self):
        return []

    def binary(self, bits):
        return tuple(top if b else 0 for b, top in zip(bits, self.upper))


@dataclass
class ToyProblem:
    """Memory falls and fps falls as genes rise, each gene its own weight."""
    app: object
    space: ToySpace

    def __call__(self, genes):
        memory = 1000 - sum((i + 1) * 7 * g for i, g in enumerate(genes))
        fps = 100.0 - sum((3 - i) * g * g for i, g in enumerate(genes))
        return memory, {"net": fps}

    def derive(self, genes):
        return self(genes)

    def plan(self, genes, fps, met):
        return (genes, fps, met)


@dataclass
class ToyApp:
    cnns: dict = field(default_factory=lambda: {"net": None})
    memory: int | None = 0
    fps: dict = field(default_factory=dict)
    prefer: str | None = None
    search: SearchSettings = field(default_factory=SearchSettings)


def test_algorithm2_runs_any_problem_and_finds_the_exact_front():
    """On a space of 3 x 2 x 3 chromosomes NSGA-II (population 8, 12 generations) meets
    them all; its front equals the non-dominated set computed by brute force."""
    upper = [2, 1, 2]
    problem = ToyProblem(ToyApp(), ToySpace(upper, ["a", "b", "c"]))
    out = algorithm2(problem.app, problem, SearchSettings(population=8, generations=12, workers=1))
    every = {g: problem(g) for g in itertools.product(*(range(u + 1) for u in upper))}

    def dominated(g):
        m, f = every[g]
        return any(m2 <= m and f2["net"] >= f["net"] and (m2, f2) != (m, f)
                   for m2, f2 in every.values())

    exact = sorted({(m, f["net"]) for g, (m, f) in every.items() if not dominated(g)})
    assert sorted((p.memory_bytes, p.fps["net"]) for p in out.front) == exact
    assert out.genes == ["a", "b", "c"] and out.chosen.memory_bytes == exact[0][0]

"""The deadline covers every stage of a ladder search (explorer/search/staged.py): a stage
past it evaluates at most one slice (or one generation's batch), then the search returns
the front it has."""
from __future__ import annotations

import time

import pytest

from explorer.app.appfile import load_app
from explorer.app.model import SearchSettings
from explorer.plan.derive import Evaluation
from explorer.plan.genes import gene_space
from explorer.search.algorithm2 import algorithm2
from explorer.search.deadline import Deadline
from explorer.search.local_search import SLICE, pareto_local_search
from explorer.search.path_relinking import relink
from explorer.search.pick import Point
from explorer.throughput.evaluator import make_evaluator

GENES = 40


def slow(asked: list, pause: float = 0.002):
    """A toy evaluation that takes `pause` seconds and records when each call started."""
    def evaluate(genes):
        asked.append(time.perf_counter())
        time.sleep(pause)
        return 10_000 - 7 * sum(genes), {"c": 100.0 - sum(genes)}
    return evaluate


def after(asked: list[float], deadline: Deadline) -> int:
    return sum(t > deadline.start + deadline.seconds for t in asked)


@pytest.mark.parametrize("stage", ["path relinking", "local search"])
def test_a_last_stage_past_the_deadline_evaluates_at_most_one_slice(stage):
    front = [Point((0,) * GENES, 10_000, {"c": 100.0}),
             Point((5,) * GENES, 10_000 - 7 * 5 * GENES, {"c": 100.0 - 5 * GENES})]
    asked: list[float] = []
    unbounded, n_all = (relink if stage == "path relinking" else pareto_local_search)(
        front, ["c"], slow([], 0.0), 16, set())
    deadline = Deadline(0.03)               # a slice of 32 takes about 64 ms
    search = relink if stage == "path relinking" else pareto_local_search
    out, n = search(front, ["c"], slow(asked), 16, set(), deadline)
    assert n == len(asked) and n < n_all
    assert after(asked, deadline) <= SLICE
    assert deadline.stopped.startswith(stage)
    assert {p.genes for p in front} <= {p.genes for p in out} | {p.genes for p in unbounded}


def test_a_spent_deadline_evaluates_nothing_in_the_last_stages():
    front = [Point((0,) * GENES, 10_000, {"c": 100.0}),
             Point((2,) * GENES, 10_000 - 14 * GENES, {"c": 100.0 - 2 * GENES})]
    asked: list[float] = []
    for search in (relink, pareto_local_search):
        out, n = search(front, ["c"], slow(asked), 4, set(), Deadline(0.0))
        assert n == 0 and out == front
    assert asked == []


@pytest.fixture(scope="module")
def vgg(tmp_path_factory):
    path = tmp_path_factory.mktemp("vgg_staged") / "app.yaml"
    path.write_text("name: vgg\ncnns:\n  - {name: n, model: 'zoo:vgg_small'}\n")
    return load_app(path, mem="0")


class Timed(Evaluation):
    """The layer-genes problem, recording when each evaluation started."""

    def __post_init__(self):
        super().__post_init__()
        self.asked: list[float] = []

    def __call__(self, genes):
        self.asked.append(time.perf_counter())
        return super().__call__(genes)


@pytest.mark.parametrize("seconds", [0.2, 1.0, 2.5])
def test_a_ladder_search_keeps_its_deadline_in_every_stage(vgg, seconds):
    """A ladder search of zoo:vgg_small with 300 generations per NSGA-II stage takes minutes;
    a deadline of a few seconds stops some stage of it; past the deadline at most one batch (an initial population's
    slice of 16, a generation of 16 chromosomes, a relinking or local-search slice of 32)."""
    problem = Timed(vgg, make_evaluator(vgg), space=gene_space(vgg, "ladder"))
    settings = SearchSettings(population=16, generations=300, workers=1)
    deadline = Deadline(seconds)
    out = algorithm2(vgg, problem, settings, deadline=deadline)
    assert out.result.stopped is not None and deadline.stopped == out.result.stopped
    assert after(problem.asked, deadline) <= SLICE
    assert out.chosen in out.front and out.front


def test_without_a_deadline_hit_the_stages_are_those_of_no_deadline(vgg):
    settings = SearchSettings(population=8, generations=2, workers=1, relink_rounds=2)
    evaluator = make_evaluator(vgg)
    plain = algorithm2(vgg, Evaluation(vgg, evaluator, space=gene_space(vgg, "ladder")), settings)
    timed = algorithm2(vgg, Evaluation(vgg, evaluator, space=gene_space(vgg, "ladder")), settings,
                       deadline=Deadline(3600.0))
    assert timed.front == plain.front and timed.result.stopped is None
    assert [s.name for s in timed.result.stages] == ["binary NSGA-II", "ladder NSGA-II",
                                                     "memory descent", "path relinking",
                                                     "local search",
                                                     "path relinking"]
    assert sum(s.evaluations for s in timed.result.stages) == timed.result.unique


def test_a_relinking_pass_with_no_evaluations_left_is_no_stage(vgg):
    """With a cap of evaluations per stage that the first path relinking spends, the second
    pass has none left: it is not run, nor listed among the stages (a 0.0 s stage); the
    descent spends the cap it shares with the local search, so neither is that."""
    settings = SearchSettings(population=8, generations=2, workers=1, relink_rounds=2,
                              stage_evaluations=1)
    out = algorithm2(vgg, Evaluation(vgg, make_evaluator(vgg), space=gene_space(vgg, "ladder")), settings)
    stages = out.result.stages
    first = next(s for s in stages if s.name == "path relinking")
    assert first.evaluations >= 1           # the cap of 1 spent (a slice may pass it)
    assert next(s for s in stages if s.name == "memory descent").evaluations == 1
    assert [s.name for s in stages] == ["binary NSGA-II", "ladder NSGA-II", "memory descent",
                                        "path relinking"]


def test_a_search_whose_pace_fits_no_key_still_ends_with_a_front(vgg):
    """The time left fits no evaluation at the pace known (a loaded machine, a slow
    network): each stage's first slice still runs, so the search has a front to pick from."""
    deadline = Deadline(0.0)
    deadline.pace = 100.0
    problem = Evaluation(vgg, make_evaluator(vgg), space=gene_space(vgg, "ladder"))
    out = algorithm2(vgg, problem, SearchSettings(population=8, generations=2, workers=1),
                     deadline=deadline)
    assert out.front and out.chosen in out.front and out.result.stopped
    assert out.result.unique <= 2 * 2               # one slice of the binary stage at most


class FakeSpace:
    """Ladder genes 0..3, the binary twin 0 or 3, one seed."""
    upper = [3] * 6
    staged = True

    def seeds(self):
        return [(1,) * 6]

    def binary(self, bits):
        return tuple(3 if b else 0 for b in bits)


@pytest.mark.parametrize("level, share", [(0.0625, 0.15), (0.125, 0.4), (None, 0.4)])
def test_the_binary_stage_gets_its_share_of_a_clock_every_evaluation_advances(level, share):
    """Each evaluation takes 1 s of a clock of the test's own, so the binary stage's
    distinct evaluations count its seconds: `share` of 100 (explorer.search.effort.
    binary_share of the fitted level), give or take the slice that crosses its end."""
    from explorer.search.effort import Effort, Refit
    from explorer.search.problem import Serial
    from explorer.search.staged import ladder_search
    now = [0.0]

    def evaluate(genes):
        now[0] += 1.0
        return 10_000 - 7 * sum(genes) + 5 * sum(g == 2 for g in genes), {"c": 100.0 - sum(genes)}

    settings = SearchSettings(population=8, generations=200, workers=1, relink_rounds=2)
    refit = None if level is None else Refit(settings, Effort(level, 1.0, 1e4, 8, 200, 2))
    deadline = Deadline(100.0, clock=lambda: now[0])
    out = ladder_search(FakeSpace(), ["c"], Serial(evaluate), settings, deadline=deadline,
                        refit=refit)
    binary = out.stages[0]
    assert binary.name == "binary NSGA-II"
    assert share * 100 <= binary.evaluations <= share * 100 + 2
    assert out.front and out.stopped is not None


@pytest.mark.parametrize("local_rounds", [0, 1])
def test_the_descent_is_a_local_search_local_rounds_0_turns_off(local_rounds):
    from explorer.search.problem import Serial
    from explorer.search.staged import ladder_search

    def evaluate(genes):     # least memory at genes (1, 2, 1, 2, 1, 2): the seed (1,) * 6 is 3 away
        return 1000 + sum(abs(g - (1 + i % 2)) for i, g in enumerate(genes)), {"c": 10.0 - sum(genes)}

    settings = SearchSettings(population=8, generations=1, workers=1, relink_rounds=0,
                              local_rounds=local_rounds)
    out = ladder_search(FakeSpace(), ["c"], Serial(evaluate), settings)
    names = [s.name for s in out.stages]
    assert ("memory descent" in names) == (local_rounds > 0)
    least = min(p.memory_bytes for p in out.front)
    assert least == 1000 or local_rounds == 0

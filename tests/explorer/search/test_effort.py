"""Effort that fits the network (explorer/search/effort.py): the level from the
predicted seconds, the scaled settings, what the user fixed left alone."""
from __future__ import annotations

from dataclasses import dataclass, field
from math import sqrt

import pytest

from explorer.app.appfile import load_app
from explorer.app.model import SearchSettings
from explorer.search import effort as ef
from sdf3.errors import InputError


@pytest.mark.parametrize("predicted, target, level", [
    (20.0, 75.0, 1.0), (75.0, 75.0, 1.0), (100.0, 75.0, 0.5), (300.0, 75.0, 0.25),
    (600.0, 75.0, 0.125), (10_000.0, 75.0, 0.0625), (152.5, 21.0, 0.125)])
def test_level_is_the_largest_that_fits(predicted, target, level):
    assert ef.choose_level(predicted, target) == level


def test_scaled_settings_keep_the_requests_in_proportion():
    s = SearchSettings()
    half = ef.scaled(s, 0.5)
    assert half.population == 4 * round(100 * sqrt(0.5) / 4) == 72
    assert half.generations == round(60 * sqrt(0.5)) == 42
    assert half.relink_rounds == 8
    tiny = ef.scaled(s, 0.0625)
    assert (tiny.population, tiny.generations, tiny.relink_rounds) == (24, 15, 2)
    mine = ef.scaled(SearchSettings(population=40, fixed=("population",)), 0.25)
    assert mine.population == 40 and mine.generations == 30


@dataclass
class Space:
    upper: list[int]
    granularity: str = "ladder"

    @property
    def staged(self) -> bool:
        return self.granularity == "ladder" and any(u > 1 for u in self.upper)


@dataclass
class FakeEvaluation:
    """Memory 100 for all-whole, 50 otherwise; counts calls."""
    space: Space = field(default_factory=lambda: Space([3] * 10))
    calls: int = 0

    def __call__(self, genes):
        self.calls += 1
        return (100 if not any(genes) else 50), {}


@dataclass
class FakeApp:
    memory: int | None = 80
    fps: dict = field(default_factory=dict)


@pytest.mark.parametrize("rate, limit, level", [(40.0, None, 0.125), (40.0, 30.0, 0.0625),
                                                (1000.0, None, 1.0)])
def test_fit_effort_from_the_measured_rate(monkeypatch, rate, limit, level):
    monkeypatch.setattr(ef, "measured_rate", lambda evaluate, upper, seed: rate)
    settings = SearchSettings(workers=1, time_limit=limit)
    fitted, chosen = ef.fit_effort(FakeApp(), FakeEvaluation(), settings)
    # two NSGA-II stages of 100 x 61 requests, half distinct, then relinking and local search
    # up to 100 x 61 evaluations each; fitted to 70% of the budget (100 s, or the limit)
    predicted = (0.5 * 100 * 61 * 2 + 2 * 100 * 61) / rate
    assert predicted * level <= 0.7 * (limit or 100.0) or level == ef.LEVELS[-1]
    assert level == 1 or predicted * 2 * level > 0.7 * (limit or 100.0)
    assert chosen.predicted_s == pytest.approx(predicted)
    assert chosen.level == level
    assert (fitted.population, fitted.generations) == (
        (100, 60) if level == 1 else (ef.scaled(settings, level).population,
                                      ef.scaled(settings, level).generations))


def test_no_fitting_when_the_user_decides_or_no_search_runs(monkeypatch):
    monkeypatch.setattr(ef, "measured_rate", lambda *a: 1.0)
    s = SearchSettings(workers=1)
    for app, settings in [(FakeApp(None), s), (FakeApp(200), s),
                          (FakeApp(), SearchSettings(effort="full")),
                          (FakeApp(), SearchSettings(fixed=ef.SCALED))]:
        assert ef.fit_effort(app, FakeEvaluation(), settings) == (settings, None)


def test_app_file_effort_and_fixed_keys(tmp_path):
    path = tmp_path / "app.yaml"
    path.write_text("name: a\ncnns:\n  - {name: n, model: 'zoo:vgg_small'}\n"
                    "search: {population: 20, relink_rounds: 3, effort: full}\n")
    s = load_app(path).search
    assert s.effort == "full" and s.fixed == ("population", "relink_rounds")
    path.write_text("name: a\ncnns:\n  - {name: n, model: 'zoo:vgg_small'}\nsearch: {effort: fast}\n")
    with pytest.raises(InputError, match="search.effort: expected one of auto, full, got 'fast'"):
        load_app(path)


def test_stage_cap_evaluates_the_first_chromosomes_asked():
    from explorer.search.local_search import pareto_local_search
    from explorer.search.pick import Point
    asked = []

    def evaluate(genes):
        asked.append(genes)
        return 100 - sum(genes), {"c": float(sum(genes))}

    front = [Point((3,) * 6, 82, {"c": 18.0})]
    full, n_full = pareto_local_search(front, ["c"], evaluate, 3, None)
    first = list(asked)
    asked.clear()
    capped, n = pareto_local_search(front, ["c"], evaluate, 3, None, limit=4)
    assert n == 4 and n_full > 4
    assert asked == first[:4]


def test_fit_effort_caps_the_last_stages(monkeypatch):
    monkeypatch.setattr(ef, "measured_rate", lambda *a: 40.0)
    fitted, chosen = ef.fit_effort(FakeApp(), FakeEvaluation(), SearchSettings(workers=1))
    assert fitted.stage_evaluations == fitted.population * (fitted.generations + 1)
    assert chosen.as_json()["stage_evaluations"] == fitted.stage_evaluations
    fixed = SearchSettings(workers=1, relink_rounds=4, fixed=("relink_rounds",))
    assert ef.fit_effort(FakeApp(), FakeEvaluation(), fixed)[0].stage_evaluations is None


class StepClock:
    """A clock that moves only when told."""
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_the_rate_is_measured_warm():
    """The first derivation of a network is slow (its caches fill): it is not timed, so the
    rate is that of the warm ones. Here it takes 5 s, past CALIBRATION_S, so the warming
    ends with it."""
    clock, calls = StepClock(), []

    def evaluate(genes):
        calls.append(genes)
        clock.t += 5.0 if len(calls) == 1 else 0.1
        return 1, {}

    rate = ef.measured_rate(evaluate, [3] * 8, seed=1, clock=clock)
    assert len(calls) == 1 + ef.CALIBRATION and len(set(calls)) == len(calls)
    assert rate == pytest.approx(ef.CALIBRATION / (0.1 * ef.CALIBRATION))
    calls.clear()
    clock.t = 0.0

    def fast(genes):                   # warm from the start: WARM untimed, then timed
        calls.append(genes)
        clock.t += 0.2 if len(calls) <= ef.WARM else 0.1
        return 1, {}

    assert ef.measured_rate(fast, [3] * 8, seed=1, clock=clock) == pytest.approx(10.0)
    assert len(calls) == ef.WARM + ef.CALIBRATION


def test_a_slow_network_is_timed_for_a_bounded_while():
    """Derivations of 1.5 s each: warming and timing each end after CALIBRATION_S seconds
    (2 chromosomes here), the rate still theirs."""
    clock, calls = StepClock(), []

    def evaluate(genes):
        calls.append(genes)
        clock.t += 1.5
        return 1, {}

    rate = ef.measured_rate(evaluate, [3] * 8, seed=1, clock=clock)
    assert 1.5 < ef.CALIBRATION_S <= 2 * 1.5 and len(calls) == 2 + 2
    assert rate == pytest.approx(1 / 1.5)


@pytest.mark.parametrize("evaluations, seconds, left, level", [
    (100, 1.0, 60.0, 0.25),      # default rest 15,250 evaluations: 152.5 s; 0.7 x 60 = 42
    (10_000, 1.0, 60.0, 1.0),    # faster than calibrated: back up to the defaults
    (10, 1.0, 60.0, 0.0625),     # far slower: the least level
    (100, 1.0, 400.0, 1.0)])
def test_refit_from_the_observed_rate(evaluations, seconds, left, level):
    base = SearchSettings(workers=2)
    first = ef.Effort(0.0625, 10.0, 1000.0, 24, 15, 2, 384)
    refit = ef.Refit(base, first)
    ran = ef.scaled(base, 0.0625)
    got = refit(ran, evaluations, seconds, left)
    rate = evaluations / seconds
    rest = (0.5 * 100 * 61 + 2 * 100 * 61) / rate      # ladder NSGA-II, relinking, local search
    assert refit.chosen.predicted_s == pytest.approx(rest) and refit.chosen.level == level
    assert rest * level <= 0.7 * left or level == ef.LEVELS[-1]
    assert level == 1 or rest * 2 * level > 0.7 * left
    want = ef.scaled(base, level) if level < 1 else base
    assert (got.population, got.generations, got.relink_rounds) == (
        want.population, want.generations, want.relink_rounds)
    assert got.stage_evaluations == want.population * (want.generations + 1)
    assert got.workers == 2


def test_refit_keeps_what_the_user_set_and_needs_an_observation():
    base = SearchSettings(population=40, fixed=("population",))
    refit = ef.Refit(base, ef.Effort(0.5, 1.0, 1.0, 40, 42, 8))
    got = refit(base, 10, 1.0, 60.0)
    assert got.population == 40 and got.generations == ef.scaled(base, refit.chosen.level).generations
    fresh = ef.Refit(base, ef.Effort(0.5, 1.0, 1.0, 40, 42, 8))
    assert fresh(base, 0, 1.0, 60.0) is base and fresh(base, 10, 1.0, None) is base
    assert fresh.chosen is None


@pytest.mark.parametrize("rate", [0.5, 2.0, 5.0, 40.0, 1000.0])
def test_the_binary_share_from_the_measured_rate(monkeypatch, rate):
    """At the least level (the defaults predicted to take more than 8 times 70% of the
    budget) the binary stage gets 15% of a ladder search's time, else 40%."""
    monkeypatch.setattr(ef, "measured_rate", lambda evaluate, upper, seed: rate)
    _, chosen = ef.fit_effort(FakeApp(), FakeEvaluation(), SearchSettings(workers=1))
    predicted = (0.5 * 100 * 61 * 2 + 2 * 100 * 61) / rate
    assert ef.binary_share(chosen.level) == (0.15 if predicted / 8 > 0.7 * 100 else 0.4)
    assert ef.binary_share(None) == 0.4

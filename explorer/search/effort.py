"""Effort that fits the network: the default population, generations and relinking rounds
scaled down when the evaluation rate measured on this network says the default search
would take longer than its time budget allows; and that budget.

The budget (`time_budget`): `explore` with the default effort (`auto`) keeps a whole run,
from building the evaluator to the last stage of the search, within `TIME_LIMIT_S`
seconds (explorer/search/deadline.py: every stage stops with the front it has once the
time is spent); `--time-limit` / `search.time_limit` replaces it; `--effort full` runs
without one unless a limit is given.

The rule (docs/search.md, "Effort"):

- requests of an NSGA-II stage: population x (generations + 1) (R), of which about half are
  distinct (the rest hit the search's cache); with ladder genes two NSGA-II stages (the
  binary stage first), then path relinking (its two passes together) and the local search,
  each up to R distinct evaluations (their cap below): `distinct_evaluations`;
- the rate: `CALIBRATION` random chromosomes of the app's gene space (seeded by the search
  seed) derived one after another in this process, after `WARM` others derived untimed
  (the first derivations of a network fill its caches: layer orders, edge tables, a
  measured profile's tables; timed cold, Table 12 app 1 with `platform: cpu` measured
  71/s and then ran at 803/s), times the speed-up of `workers` processes (1 + 0.5 per
  extra worker, as measured on a 2-core machine: app 1 took 1.5x less time with two
  workers than with one);
- the level: the largest of 1, 1/2, 1/4, 1/8, 1/16 whose predicted seconds stay within
  70% of the search's seconds (what the run's budget leaves it: explorer/search/run_budget.py;
  the rest covers the prediction's error and the last step past the deadline); population and generations
  each shrink by the square root of the level (so their product, the requests, by the
  level), relinking rounds by the level; never below 16, 8 and 2;
- path relinking (its two passes together) and the local search may each evaluate at most
  population x (generations + 1) chromosomes, one NSGA-II stage's requests
  (`SearchSettings.stage_evaluations`): their neighbourhoods grow with the front and the
  genes (DenseNet-121 in torchvision's form: 3,950 of 5,132 evaluations, 180 of 208 s).

The binary NSGA-II stage of a ladder search gets 40% of the search's time, 15% at the
least level (`binary_share`).

Re-fitted as the run goes (`Refit`): after the binary NSGA-II stage of a ladder search, the
distinct evaluations per second it observed (the workers, the machine's load and the
network's real chromosomes included) give the level of the stages after it, fitted to 70%
of the time the deadline leaves them, up or down from the calibrated level.

Only the settings the user did not set are scaled (`SearchSettings.fixed` lists the ones
given in the app file or on the command line); `--effort full` (search.effort: full) keeps
the defaults. Levels are a factor of 2 apart, so the measured rate moves the choice only
when it moves by that much; the chosen level and the rate it came from are printed and
written to pareto.json, and fixing population and generations makes a run repeatable on
any machine.
"""
from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, replace
from math import sqrt
from typing import Callable

TIME_LIMIT_S = 100.0          # seconds a default `explore` run keeps to
FITTED = 0.7                  # share of the budget the predicted evaluations are fitted to
CALIBRATION = 6               # chromosomes timed
WARM = 3                      # chromosomes derived before the timing
CALIBRATION_S = 2.0           # seconds after which warming, and timing, stop (1 chromosome at least)
LEVELS = (1.0, 0.5, 0.25, 0.125, 0.0625)
DISTINCT = 0.5                # share of requests that are not cache hits
SCALED = ("population", "generations", "relink_rounds")
BINARY_SHARE = 0.4            # share of a ladder search's time its binary NSGA-II stage gets
STARVED_BINARY_SHARE = 0.15   # the same at the least level (binary_share)


@dataclass(frozen=True)
class Effort:
    level: float              # share of the default requests kept
    rate: float               # evaluations per second measured in one process (0: not measured)
    predicted_s: float        # the default's predicted seconds at that rate
    population: int
    generations: int
    relink_rounds: int
    stage_evaluations: int | None = None
    refit: Effort | None = None  # the stages after the binary NSGA-II, fitted again (Refit)

    def as_json(self) -> dict:
        return {"level": self.level, "rate": round(self.rate, 1),
                "predicted_s": round(self.predicted_s, 1), "population": self.population,
                "generations": self.generations, "relink_rounds": self.relink_rounds,
                "stage_evaluations": self.stage_evaluations,
                **({"refit": self.refit.as_json()} if self.refit is not None else {})}


def distinct_evaluations(population: int, generations: int, stages: int,
                         last_stages: int = 0) -> float:
    """Distinct evaluations of `stages` NSGA-II stages and `last_stages` capped ones."""
    requests = population * (generations + 1)
    return DISTINCT * requests * stages + requests * last_stages


def speedup(workers: int) -> float:
    return 1.0 + 0.5 * max(0, workers - 1)


def choose_level(predicted_s: float, target_s: float) -> float:
    """The largest level whose share of `predicted_s` fits `target_s` (the smallest if none)."""
    return next((f for f in LEVELS if predicted_s * f <= target_s), LEVELS[-1])


def binary_share(level: float | None) -> float:
    """The share of a ladder search's time (explorer.search.staged) its binary NSGA-II
    stage gets at the fitted `level` (None: the effort is the user's): `BINARY_SHARE`, and
    at the least level, where the defaults would take 16 times the time or more,
    `STARVED_BINARY_SHARE`, the rest going to the stages that improve the least memory.
    Measured on PP-OCRv4 detection (level 1/16, 100 s): the binary stage's 37 s ended at
    29.51 MiB and its 13 s at 30.84, and the ladder stage seeded with either front
    reached 29.35; with the time moved on to the descent, runs ended at 27.35-28.64 MiB
    (benchmarks/results/search_budget.md)."""
    return STARVED_BINARY_SHARE if level is not None and level <= LEVELS[-1] else BINARY_SHARE


def scaled(settings, level: float):
    """`settings` with the effort not fixed by the user scaled to `level`."""
    fixed = set(settings.fixed)
    out = {}
    if "population" not in fixed:
        out["population"] = max(16, 4 * round(settings.population * sqrt(level) / 4))
    if "generations" not in fixed:
        out["generations"] = max(8, round(settings.generations * sqrt(level)))
    if "relink_rounds" not in fixed:
        out["relink_rounds"] = max(2, round(settings.relink_rounds * level))
    return replace(settings, **{k: v for k, v in out.items() if v < getattr(settings, k)})


def measured_rate(evaluate, upper: list[int], seed: int,
                  clock: Callable[[], float] = time.perf_counter) -> float:
    """Evaluations per second of `CALIBRATION` random chromosomes (each gene by parts with
    probability 1/2, at a random step of its range) in this process, timed after `WARM`
    others (distinct draws, so the timed ones hit no cache of whole chromosomes). On a
    network whose derivations take seconds both the warming and the timing end after
    `CALIBRATION_S` seconds (one chromosome each at least): levels are a factor of 2
    apart, and such a rate is far below the least level's anyway."""
    rnd = random.Random(seed)
    batch = [tuple(rnd.randint(1, u) if u and rnd.random() < 0.5 else 0 for u in upper)
             for _ in range(WARM + CALIBRATION)]

    def derive(chromosomes) -> tuple[int, float]:
        start, n = clock(), 0
        for genes in chromosomes:
            evaluate(genes)
            n += 1
            if clock() - start >= CALIBRATION_S:
                break
        return n, clock() - start

    derive(batch[:WARM])
    timed, seconds = derive(batch[WARM:])
    return timed / max(seconds, 1e-9)


def time_budget(settings) -> float | None:
    """Seconds the whole run may take: the settings' `time_limit`, else `TIME_LIMIT_S` with
    the default effort, else none."""
    if settings.time_limit is not None:
        return settings.time_limit
    return TIME_LIMIT_S if settings.effort == "auto" else None


def search_runs(app, evaluate) -> bool:
    """Whether Algorithm 2 searches `app` (no early exit: reuse alone does not answer)."""
    upper = list(evaluate.space.upper)
    if not upper:
        return False
    memory, fps = evaluate(tuple(0 for _ in upper))
    from explorer.search.pick import Point, search_needed
    return search_needed(Point((), memory, fps), app.memory, app.fps, getattr(app, "prefer", None))


def fit_effort(app, evaluate, settings, seconds: float | None = None
               ) -> tuple[object, Effort | None]:
    """(settings, the effort chosen) for a search of `app` with `evaluate`
    (a search problem, explorer/search/problem.py) in `seconds` (default: the whole time
    budget); settings unchanged and None when the effort is the user's (`effort: full`,
    every scaled key fixed, a cluster) or no search will run."""
    space = evaluate.space
    upper = list(space.upper)
    if (settings.effort != "auto" or settings.cluster or not upper
            or set(SCALED) <= set(settings.fixed)):
        return settings, None
    if not search_runs(app, evaluate):
        return settings, None                                  # Algorithm 2 exits early
    rate = measured_rate(evaluate, upper, settings.seed)
    stages, last = (2, 2) if space.staged else (1, 0)     # relinking and local search
    workers = settings.workers or os.cpu_count() or 1
    predicted = distinct_evaluations(settings.population, settings.generations, stages, last) \
        / (rate * speedup(workers))
    target = FITTED * (seconds if seconds is not None else time_budget(settings) or TIME_LIMIT_S)
    level = choose_level(predicted, target)
    fitted = at_level(settings, level)
    return fitted, Effort(level, rate, predicted, fitted.population, fitted.generations,
                          fitted.relink_rounds, fitted.stage_evaluations)


def at_level(settings, level: float):
    """`settings` (as the user gave them) at `level`, the last stages' cap with them."""
    fitted = scaled(settings, level) if level < 1 else settings
    if "relink_rounds" not in settings.fixed:
        fitted = replace(fitted, stage_evaluations=fitted.population * (fitted.generations + 1))
    return fitted


@dataclass
class Refit:
    """The effort of a ladder search's stages after its binary NSGA-II, fitted again from
    the rate that stage observed: `base` the settings as the user gave them, `first` the
    calibrated effort; `chosen` the re-fitted effort once called."""
    base: object
    first: Effort
    chosen: Effort | None = None

    def __call__(self, settings, evaluations: int, seconds: float, left_s: float | None):
        """The settings of the stages still to run, after `evaluations` distinct
        evaluations in `seconds` (workers included) with `left_s` seconds left (None: no
        deadline); `settings` unchanged when nothing was observed."""
        if left_s is None or evaluations <= 0 or seconds <= 0:
            return settings
        rate = evaluations / seconds
        b = self.base
        predicted = distinct_evaluations(b.population, b.generations, 1, 2) / rate
        level = choose_level(predicted, FITTED * left_s)
        fitted = at_level(b, level)
        self.chosen = Effort(level, rate, predicted, fitted.population, fitted.generations,
                             fitted.relink_rounds, fitted.stage_evaluations)
        return replace(settings, population=fitted.population, generations=fitted.generations,
                       relink_rounds=fitted.relink_rounds,
                       stage_evaluations=fitted.stage_evaluations)

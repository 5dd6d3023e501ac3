"""The whole run's budget (explorer/search/run_budget.py): the search's share after the
stages before it and the outputs' estimate, the stages' seconds on an injected clock, and the
process's age."""
from __future__ import annotations

import subprocess
import sys

import pytest

from explorer.search import run_budget as rb


class Clock:
    def __init__(self, t: float = 0.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.mark.parametrize("budget, spent, after, left", [
    (100.0, 10.0, 5.0, 100.0 - 10.0 - 5.0 - rb.MARGIN_S),
    (100.0, 0.0, 0.0, 100.0 - rb.MARGIN_S),
    (10.0, 9.0, 5.0, 0.0),                      # nothing left: no search time, not negative
    (1.0, 0.0, 0.0, 0.0),
    (None, 50.0, 5.0, None)])                   # no budget: no deadline
def test_the_search_gets_what_the_other_stages_leave(budget, spent, after, left):
    got = rb.search_seconds(budget, spent, after)
    assert got == (None if left is None else pytest.approx(left))


@pytest.mark.parametrize("plan_s, figure_s", [(0.0, 0.0), (1.5, 0.25), (20.0, 3.0)])
def test_the_outputs_estimate_counts_plans_and_figures(plan_s, figure_s):
    assert rb.outputs_estimate(plan_s, figure_s) == pytest.approx(
        rb.LOAD_RISE * (rb.PLANS_AFTER * plan_s + rb.FIGURES_AFTER * figure_s))


def test_the_clock_records_each_stage_and_the_search_share():
    clock = Clock(1000.0)
    run = rb.RunClock(100.0, start=997.5, clock=clock)    # the process began 2.5 s ago
    clock.t = 1001.0
    run.stage("import")
    clock.t = 1004.0
    run.stage("analysis")
    clock.t = 1010.0
    run.skip()                                   # a stage timed elsewhere
    clock.t = 1011.0
    run.stage("calibration")
    assert [(s.name, s.seconds) for s in run.stages] == [
        ("import", 3.5), ("analysis", 3.0), ("calibration", 1.0)]
    assert run.elapsed() == 13.5
    assert run.search_seconds(4.0) == pytest.approx(100.0 - 13.5 - 4.0 - rb.MARGIN_S)
    clock.t = 1013.0
    assert run.since_mark() == 2.0
    assert rb.RunClock(None, clock=clock).search_seconds(4.0) is None


def test_process_age_counts_from_the_process_start():
    code = ("import time; time.sleep(0.6); from explorer.search.run_budget import process_age;"
            " print(process_age())")
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True).stdout)
    assert 0.6 <= age < 30

"""The whole run's time budget shared out between its stages.

An `explore` run is import (the app and its ONNX models), analysis (the evaluator, the
gene space, the bounds), calibration (the evaluation rate and the cost of the outputs,
explorer/search/effort.py), the search (its own stages, explorer/search/deadline.py) and the
outputs (the chosen plan, the baselines, the files). The budget (`--time-limit`, else 100 s
with the default effort) counts from the process's start; `RunClock` records each stage's
seconds as it ends, and the search gets what the stages before it left less what the
stages after it will need:

    search seconds = budget - seconds spent so far - estimated outputs - MARGIN_S

The estimate of the outputs is measured, not guessed (`outputs_estimate`): the seconds of
the largest plan's derivation and plan (every layer row by row: the most steps a chosen
plan can have; timed once its partitions are in the search's cache, as the outputs find
them) count `PLANS_AFTER` times (the chosen plan, its memory pictures and SDF3 graphs, the
reuse-only picture; the report's baselines are made before the search), the seconds of one front figure `FIGURES_AFTER` times (report.html's front and
the rest of the page): a loaded machine slows both as it slows the outputs. Measured at a
load of 12-17, the outputs of the largest plan took 4-6 plans' and 2 figures' worth on
PP-OCRv4 detection and the three-CNN OCR app (the SDF3 graphs, the memory pictures and
the validity check grow with the steps too), hence 6. The sum counts `LOAD_RISE` times:
with four busy processes beside it on a shared 2-core machine whose load rose from 10 to
25 during the run, PP-OCRv4 detection's outputs took 3.2 times their estimate, the
three-CNN app's 0.7 times. `MARGIN_S` covers the search's last slice past its deadline
(explorer.search.deadline: about one derivation), the workers' shutdown and the process's
exit (1 s at a load of 13).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable

from explorer.search.deadline import SLICE_S
from explorer.search.progress import StageTime

PLANS_AFTER = 6          # plans' worth of work in the outputs (measured: 4-6, see below)
FIGURES_AFTER = 2        # front figures' worth of drawing in the outputs
LOAD_RISE = 2.0          # the outputs may run on a machine busier than the calibration's
MARGIN_S = SLICE_S + 2.0


def process_age() -> float:
    """Seconds since this process started (Linux /proc; 0 where it cannot be read), so a
    budget counts the interpreter's start and its imports too."""
    try:
        start_ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
        uptime = float(open("/proc/uptime").read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def outputs_estimate(plan_s: float, figure_s: float) -> float:
    """Seconds the outputs will take, from the measured seconds of the largest plan
    (`plan_s`: derivation and plan) and of one front figure (`figure_s`)."""
    return LOAD_RISE * (PLANS_AFTER * plan_s + FIGURES_AFTER * figure_s)


def search_seconds(budget_s: float | None, spent_s: float, after_s: float) -> float | None:
    """The search's share: what the budget leaves after the stages so far (`spent_s`) and
    those after the search (`after_s`, estimated) and the margin; never below 0; None
    without a budget."""
    if budget_s is None:
        return None
    return max(0.0, budget_s - spent_s - after_s - MARGIN_S)


@dataclass
class RunClock:
    """The run's clock: `budget_s` (None: no budget) from `start` (a `clock` reading: the
    process's start for `explore`); `stage(name)` ends a stage and records its seconds."""
    budget_s: float | None
    start: float | None = None
    clock: Callable[[], float] = time.perf_counter
    stages: list[StageTime] = field(default_factory=list)
    mark: float | None = None                   # when the current stage began

    def __post_init__(self) -> None:
        if self.start is None:
            self.start = self.clock()
        self.mark = self.start

    def elapsed(self) -> float:
        return self.clock() - self.start

    def stage(self, name: str) -> StageTime:
        """Ends the stage begun at the last mark (the run's start at first) as `name`."""
        now = self.clock()
        done = StageTime(name, now - self.mark)
        self.stages.append(done)
        self.mark = now
        return done

    def skip(self) -> None:
        """The time since the last mark belongs to a stage recorded elsewhere (the search
        records its own)."""
        self.mark = self.clock()

    def since_mark(self) -> float:
        """Seconds since the last stage ended (or `skip`)."""
        return self.clock() - self.mark

    def search_seconds(self, after_s: float) -> float | None:
        """The search's seconds from now (`search_seconds`)."""
        return search_seconds(self.budget_s, self.elapsed(), after_s)

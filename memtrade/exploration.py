"""`memtrade.explore`: the methodology on an application, as a value a program can use.

Algorithm 2 (explorer.search.algorithm2.algorithm2) over the app's search problem
(memtrade/problem.py), after the bounds and the effort fit, gives an `Exploration`: the
Pareto front as typed points, the point chosen by the rules of explorer/search/pick.py, the
chosen plan and the plan of any other point. `Exploration.write(out)` writes exactly the
files `explore APP.yaml --out DIR` writes (memtrade/front_files.py); in a notebook the
exploration shows itself as the front and the chosen plan's memory over the schedule.

>>> import memtrade
>>> app = memtrade.load_app("apps/table13_mobilenet_sequential.yaml")
>>> found = memtrade.explore(app, mem="8MB", fps=71)        # doctest: +SKIP
>>> found.plan.memory_bytes <= 8 * 2**20                    # doctest: +SKIP
True
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

from explorer.app.model import Application
from explorer.plan.model import Plan
from explorer.search.algorithm2 import Outcome
from explorer.search.pick import meets
from sdf3.errors import InputError
from explorer.search.progress import GenerationStats, StageTime
from memtrade.app import load_app, with_constraints
from memtrade.problem import bounds, evaluator_for, plan_on_platform, problem_for
from memtrade.settings import check_tiling, search_settings


@dataclass(frozen=True)
class FrontPoint:
    """One point of the front: its place in it (pareto.json's and report.html's point
    number), genes in gene order, memory in bytes, predicted fps per CNN, and whether it
    meets the app's constraints."""
    index: int
    genes: tuple[int, ...]
    memory_bytes: int
    fps: Mapping[str, float]
    meets: bool


@dataclass(frozen=True)
class Exploration:
    """What `explore` found for `app` (the app as searched: constraints and precision
    applied). `points` the front, least memory first; `chosen` the picked point and `plan`
    its plan; `met` whether it meets the constraints (else it is the least-memory point)."""
    app: Application
    points: tuple[FrontPoint, ...]
    chosen: FrontPoint
    plan: Plan
    met: bool
    rule: str
    evaluator_name: str
    settings: Any                  # explorer.app.model.SearchSettings the search ran with
    tiling: str | None
    evaluator_spec: str | None
    bounds_line: str
    stages: tuple[StageTime, ...]
    time_budget_s: float | None
    effort: Any = None             # explorer.search.effort.Effort when the effort was fitted
    _work: Any = field(default=None, repr=False, compare=False)   # problem, evaluator, outcome

    @property
    def genes(self) -> tuple[str, ...]:
        """The gene labels ("cnn.layer"), in gene order."""
        return tuple(self._work.outcome.genes)

    def plan_of(self, point: FrontPoint | int,
                warn: Callable[[str], None] | None = None) -> Plan:
        """The plan of a front point (or its index): what `explore deploy --point N` deploys.
        A FrontPoint is checked as pareto.json's points are (memtrade/front_check.py): genes
        of the app in range, fps computed again from them (`warn` hears when they differ)."""
        from explorer.search.pick import Point
        from memtrade.front_check import checked_genes, point_index, recomputed_fps
        w = self._work
        if not isinstance(point, FrontPoint):
            point = self.points[point_index(point, len(self.points), "the exploration's front")]
        p, where = point, f"point {point.index}"
        genes = checked_genes(p.genes, w.problem.space.labels, w.problem.space.upper, where)
        fps = recomputed_fps(w.problem, genes, dict(p.fps), where, warn)
        met = meets(Point(genes, p.memory_bytes, fps), self.app.memory, self.app.fps)
        return plan_on_platform(w.problem, w.evaluator, genes, fps, met)

    def summary(self) -> list[str]:
        """The lines `explore` prints (memtrade/summary.py)."""
        from memtrade.summary import summary_lines
        return summary_lines(self)

    def write(self, out: str | Path, force: bool = False) -> list[Path]:
        """Write pareto.json, pareto.csv, plan.json, report.html and the SDF3 XML of every
        partition into directory `out` (refused when it is not empty, unless `force`);
        returns the paths written."""
        from explorer.report.outputs import claim_dir
        from memtrade.front_files import write_files
        staged = claim_dir(out, force)
        with staged as tmp:
            written, _ = write_files(self, tmp, staged.final)
        return [staged.final / p.name for p in written]

    def _repr_html_(self) -> str:
        from memtrade.front_files import notebook_html
        return notebook_html(self)


@dataclass(frozen=True)
class _Work:
    """The objects the exploration keeps to derive any point's plan and write its files."""
    problem: Any
    evaluator: Any
    outcome: Outcome
    derived: Any                    # the chosen plan's derivation
    after_search_s: float           # seconds spent after the search (the chosen plan)
    outputs_estimate_s: float = 0.0  # the outputs' seconds as estimated before the search
    search_s: float | None = None    # the search's seconds (None: no budget)
    baselines: dict | None = None    # the report's baseline rows, made before the search


def explore(app: Application | str | Path | Mapping, mem: str | int | None = None,
            fps: float | str | Mapping[str, float] | None = None, prefer: str | None = None,
            time_limit: float | None = None, effort: str | None = None, cluster: str | None = None,
            progress: Callable[[GenerationStats], None] | None = None, *,
            precision: str | None = None, evaluator: str | None = None,
            granularity: str | None = None, tiling: str | None = None,
            placement: str | None = None, seed: int | None = None,
            population: int | None = None, generations: int | None = None,
            workers: int | None = None, relink_rounds: int | None = None,
            local_rounds: int | None = None, say: Callable[[str], None] | None = None,
            started: float | None = None, calibration: str | Path | None = None,
            calibration_method: str | None = None, min_sqnr: float | None = None,
            _flag: Callable[[str], str] = str) -> Exploration:
    """The methodology on `app` (an Application, an app file or a mapping as memtrade.load_app
    takes): buffer reuse, then Algorithm 2 when reuse alone does not answer the constraints.
    `mem` (bytes, or "8MB"; 0 = the least memory as a goal), `fps` (one value for every CNN,
    a mapping by CNN name, or "name=71,..."), `prefer` ("memory" or "fps") and `precision`
    override the app's; the search settings override the app's `search:`. `effort` (None:
    the app's, "auto" unless it says otherwise): "auto" fits population, generations and
    relinking to the measured evaluation rate within the time budget (`time_limit` seconds,
    default 100), "full" keeps them. The budget counts from `started` (a time.perf_counter
    reading: `explore` gives its process's start; default now) and covers every stage
    (explorer/search/run_budget.py): the search gets what import, analysis and calibration
    left, less the outputs' measured estimate. `progress` hears each step of the search;
    `say` hears the bounds line before the search starts (and, with `platform: cpu`, the
    measuring). With `precision: auto` each layer's precision is searched too, its error
    estimated from each CNN's sensitivity table measured on the frames of `calibration`
    (.npy/.npz as `explore deploy --calibration` reads them; None: generated frames, with a
    warning) with int8 scales by `calibration_method`; `min_sqnr` (dB) overrides the app's
    `min_sqnr_db`."""
    from explorer.search.deadline import Deadline
    from explorer.search.effort import Refit, fit_effort, search_runs, time_budget
    from explorer.search.run_budget import RunClock

    app = with_constraints(app if isinstance(app, Application) else load_app(app), mem, fps,
                           prefer, precision, placement)
    if min_sqnr is not None:
        if not app.precisions:
            raise InputError(f"{_flag('min_sqnr')}: a constraint of precision: auto, expected "
                             f"no {_flag('min_sqnr')} with precision {app.precision.name}")
        if isinstance(min_sqnr, bool) or not isinstance(min_sqnr, (int, float)) or not math.isfinite(min_sqnr):
            raise InputError(f"{_flag('min_sqnr')}: expected a number of dB, got {min_sqnr!r}")
        app = replace(app, min_sqnr_db=float(min_sqnr))
    settings = search_settings(app.search, granularity=granularity, cluster=cluster,
                               effort=effort, time_limit_s=time_limit, flag=_flag, seed=seed,
                               population=population, generations=generations,
                               workers=workers, relink_rounds=relink_rounds,
                               local_rounds=local_rounds)
    tiling = check_tiling(tiling, _flag)
    clock = RunClock(time_budget(settings), started)
    clock.stage("import")
    tables = None
    if app.precisions:
        if tiling:
            raise InputError(f"{_flag('tiling')} {tiling}: precision: auto has layer genes only; "
                             f"expected no {_flag('tiling')} with it")
        from memtrade.sensitivity import sensitivity_tables
        tables = sensitivity_tables(app, calibration, calibration_method, say or (lambda line: None))
        clock.stage("sensitivity")
    elif calibration is not None or calibration_method is not None:
        raise InputError(f"{_flag('calibration')}: measures the sensitivity table of "
                         f"precision: auto; expected none with precision {app.precision.name}")
    ev = evaluator_for(app, evaluator, quiet=say is None)
    problem, search = problem_for(app, ev, settings, tiling, tables)
    bound = bounds(problem)
    if say is not None:
        say(bound)
    clock.stage("analysis")
    base = settings
    after = 0.0
    marks = None
    if clock.budget_s is not None and search_runs(app, problem):
        from memtrade.front_files import measure_outputs
        from memtrade.summary import baseline_rows
        marks = baseline_rows(app, getattr(problem, "cache", None))   # the search's outputs
        after = measure_outputs(problem)                            # can make them now
    settings, fitted = fit_effort(app, problem, settings, clock.search_seconds(after))
    if fitted is not None or after:
        clock.stage("calibration")
    clock.skip()
    search_s = clock.search_seconds(after)
    deadline = Deadline(search_s)                        # the search's, from here
    refit = Refit(base, fitted) if fitted is not None and tiling is None else None
    outcome = search(app, problem, settings, progress, deadline=deadline,
                     **({"refit": refit} if refit is not None else {}))
    if refit is not None and refit.chosen is not None:
        fitted = replace(fitted, refit=refit.chosen)
    # the search's time outside its stages: the reuse-only point, the workers' start and stop
    setup = clock.since_mark() - sum(s.seconds for s in outcome.result.stages)
    started = time.perf_counter()
    if tables is not None:          # the chosen precisions' rounding measured against min_sqnr_db
        from memtrade.sensitivity import checked
        outcome, plan = checked(app, problem, outcome,
                                lambda p, met: plan_on_platform(problem, ev, p.genes, p.fps, met),
                                calibration, calibration_method, say or (lambda line: None))
    chosen = outcome.chosen
    derived = problem.derive(chosen.genes)
    if tables is None:
        plan = plan_on_platform(problem, ev, chosen.genes, chosen.fps, outcome.met)
    points = tuple(FrontPoint(i, tuple(p.genes), int(p.memory_bytes), MappingProxyType(dict(p.fps)),
                              meets(p, app.memory, app.fps))
                   for i, p in enumerate(outcome.front))
    index = next((p.index for p in points if p.genes == tuple(chosen.genes)), 0)
    stages = tuple(clock.stages) + tuple(outcome.result.stages) + (
        (StageTime("setup", setup),) if setup >= 0.05 else ())
    work = _Work(problem, ev, outcome, derived, time.perf_counter() - started, after, search_s,
                 marks)
    return Exploration(app, points, replace(points[index], meets=outcome.met) if points else
                       FrontPoint(0, tuple(chosen.genes), int(chosen.memory_bytes),
                                  MappingProxyType(dict(chosen.fps)), outcome.met),
                       plan, outcome.met, outcome.rule, ev.name, settings, tiling, evaluator,
                       bound, stages, clock.budget_s, fitted, work)

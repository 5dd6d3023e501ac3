"""The files of an exploration, as `explore APP.yaml --out DIR` writes them: pareto.json (the
front, every point's genes and what the search ran with, so `deploy --point N` can derive any
point again), pareto.csv, plan.json (the chosen point), report.html (the front, the
constraints, the baselines, the memory pictures) and the SDF3 XML of every partition of the
chosen plan (explorer/report/sdf3_export.py). An app given as a mapping is written beside
them as app.yaml (model paths absolute), and the plan names that file."""
from __future__ import annotations

import html
import time
from dataclasses import replace
from pathlib import Path

from explorer.plan.model import to_json
from explorer.report.pareto import (front_svg, write_pareto_csv, write_pareto_json,
                                    write_report_html)
from explorer.report.sdf3_export import write_partitions
from explorer.search.progress import StageTime, stage_line
from memtrade.summary import baselines_for, gene_cells, memory_pictures, summary_lines

APP_FILE = "app.yaml"


def write_files(ex, out: Path, final: Path | None = None) -> tuple[list[Path], float]:
    """Write exploration `ex`'s files into directory `out` (`final`: where `out` ends up,
    named by plan.json when the app is written beside it); the paths written and the
    seconds of the run's `outputs` stage: after the search, writing included."""
    started = time.perf_counter()
    app, w, plan, settings = ex.app, ex._work, ex.plan, ex.settings
    written = []
    if app.path is None and app.document is not None:
        import yaml
        (out / APP_FILE).write_text(yaml.safe_dump(app.document, sort_keys=False))
        written.append(out / APP_FILE)
        plan = replace(plan, app=str(Path(final or out).resolve() / APP_FILE))
    outcome, r = w.outcome, w.outcome.result
    cnns = list(app.cnns)
    strips, by_parts = gene_cells(w.problem, outcome.front)
    write_pareto_json(outcome.front, cnns, outcome.genes, out / "pareto.json", extra={
        "app": plan.app, "name": app.name, "early_exit": r.early_exit, "seed": settings.seed,
        "population": settings.population, "generations": settings.generations,
        "granularity": settings.granularity, "relink_rounds": settings.relink_rounds,
        "precision": "auto" if app.precisions else app.precision.name, "placement": app.placement,
        "evaluator": ex.evaluator_spec, "tiling": ex.tiling,
        "local_rounds": settings.local_rounds,
        "evaluations": r.evaluations, "unique": r.unique, "seconds": round(r.seconds, 3),
        "constraints": plan.constraints.to_dict(), "chosen": list(outcome.chosen.genes),
        "rule": outcome.rule, "prefer": app.prefer,
        "time_limit": settings.time_limit, "stopped_on_time": r.stopped,
        "constraints_met": plan.constraints_met,
        "effort": ex.effort.as_json() if ex.effort is not None else None,
        "budget": None if ex.time_budget_s is None else {
            "seconds": ex.time_budget_s, "search_s": round(w.search_s or 0.0, 2),
            "outputs_estimate_s": round(w.outputs_estimate_s, 2)}}, by_parts=by_parts)
    write_pareto_csv(outcome.front, cnns, outcome.genes, out / "pareto.csv", by_parts)
    to_json(plan, out / "plan.json")
    xml = write_partitions(app, plan, out, w.evaluator)
    notes = summary_lines(ex)
    write_report_html(out / "report.html", f"memtrade: {app.name}", outcome.front, cnns,
                      outcome.genes, app.memory, app.fps, baselines_for(app, w.evaluator, w.derived,
                                                                getattr(w.problem, "cache", None),
                                                                w.baselines),
                      outcome.chosen, outcome.met, notes, memory_pictures(w.problem, plan, w.derived),
                      strips, by_parts)
    paths = written + [out / n for n in ("plan.json", "pareto.json", "pareto.csv", "report.html")]
    return paths + list(xml), w.after_search_s + time.perf_counter() - started


def measure_outputs(problem, clock=time.perf_counter) -> float:
    """Seconds the outputs of a run of `problem` will take, estimated from two measured
    costs (explorer.search.run_budget.outputs_estimate): the largest plan's derivation and
    plan (every gene at its last value: every layer row by row, the most steps) and one
    front figure, each timed the second time it is made, as the outputs make them: the
    first fills the problem's cache with the largest plan's partitions (the report's
    all-parts baseline derives them again) and loads the plotting library."""
    from explorer.search.pick import Point
    from explorer.search.run_budget import outputs_estimate

    upper = tuple(problem.space.upper)
    zeros = (0,) * len(upper)
    memory, fps = problem(zeros)
    point = Point(zeros, int(memory), dict(fps))
    cnns = list(problem.app.cnns)
    seconds = []
    for make in (lambda: problem.plan(upper, {}, False),
                 lambda: front_svg([point], cnns, None, {}, [], point)):
        make()
        start = clock()
        make()
        seconds.append(clock() - start)
    return outputs_estimate(*seconds)


def stages_line(ex, outputs: float) -> str:
    """'stages  effort 1.2 s, NSGA-II 3.4 s, ..., outputs 0.5 s (time budget 100 s)'."""
    budget = "" if ex.time_budget_s is None else f" (time budget {ex.time_budget_s:g} s)"
    return stage_line(list(ex.stages) + [StageTime("outputs", outputs)]) + budget


def notebook_html(ex) -> str:
    """The exploration in a notebook: the summary, the front plotted with the constraints
    and the chosen point, and the chosen plan's memory over the schedule."""
    from explorer.report.memory_svg import plan_pictures
    w = ex._work
    svg = front_svg(w.outcome.front, list(ex.app.cnns), ex.app.memory, ex.app.fps, [],
                    w.outcome.chosen)
    pictures = "".join(plan_pictures(ex.plan, w.derived).values())
    lines = "\n".join(html.escape(line) for line in summary_lines(ex))
    return (f"<div class=\"memtrade-exploration\"><h3>memtrade: {html.escape(ex.app.name)}</h3>"
            f"<pre>{lines}</pre>{svg}<h4>chosen plan: memory over the schedule</h4>{pictures}</div>")

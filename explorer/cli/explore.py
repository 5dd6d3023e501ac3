"""`explore APP.yaml [--mem 8MB] [--fps 71 | --fps name=71,...] [--out DIR]`: the methodology.

Algorithm 2 (explorer.search.algorithm2.algorithm2) over DeriveApplicationWithReducedBufs
(explorer.plan.derive), then the files of DIR: pareto.json, pareto.csv, plan.json (the chosen
point), report.html (the front, the constraints, the baselines) and the SDF3 XML of every
partition of the chosen plan (`<cnn>.<partition>.xml`: explorer/report/sdf3_export.py, buffer
sizes in rows as capacity channels, the evaluator's per-phase times in ns).
Exit 0 when the chosen plan meets M^c and every T^c, 3 when no point of the front does
(the least-memory plan is still written). Without --out, DIR is runs/<name>-<n> under the
current directory: <name> the app's name made a safe directory name (explorer.report.outputs.
safe_name), n the first number not taken. DIR is claimed before the search and written
through a temporary sibling (explorer.report.outputs), so a failed or interrupted run leaves none.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from explorer.report.outputs import Staged, claim_dir, claim_new_dir, safe_name
from explorer.report.sdf3_export import write_partitions
from explorer.app.units import format_bytes
from sdf3.errors import InputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", help="application file (YAML)")
    parser.add_argument("--mem", help="memory constraint M^c, e.g. 8MB (0 = least memory)")
    parser.add_argument("--fps", help="throughput constraint T^c: one value for every CNN, or "
                                      "name=value,... (0 = none)")
    parser.add_argument("--precision", choices=["fp32", "fp16", "mixed", "int8"],
                        help="override the app's precision")
    parser.add_argument("--evaluator", default=None,
                        help="throughput evaluator: profile (default), measured, a built-in "
                             "profile name or a profile file")
    parser.add_argument("--out", help="output directory (default: runs/<app name>-<n>)")
    parser.add_argument("--force", action="store_true", help="write into a non-empty --out")
    parser.add_argument("--seed", type=int, help="random seed (default: the app's search.seed)")
    parser.add_argument("--population", type=int, help="NSGA-II population (app's default)")
    parser.add_argument("--generations", type=int, help="NSGA-II generations (app's default)")
    parser.add_argument("--workers", type=int,
                        help="processes evaluating chromosomes (0 = one per CPU, the default; "
                             "results do not depend on it)")
    parser.add_argument("--relink-rounds", type=int, dest="relink_rounds",
                        help="rounds of path relinking between neighbouring front points after "
                             "a ladder search (explorer/search/path_relinking.py; default: the app's, 16)")
    parser.add_argument("--local-rounds", type=int, dest="local_rounds",
                        help="rounds of Pareto local search toward whole layers after the "
                             "relinking (explorer/search/local_search.py; default: the app's, 1)")
    parser.add_argument("--effort", choices=["auto", "full"],
                        help="auto (default): population, generations and relinking rounds you "
                             "did not set scaled to the network's measured evaluation rate, all "
                             "stages fitted to 70%% of the time budget (explorer/search/effort.py); "
                             "full: the defaults as they are, no time budget unless --time-limit")
    parser.add_argument("--granularity", choices=["ladder", "binary"],
                        help="genes: rows per phase from a ladder, or the paper's binary "
                             "whole/row-by-row (default: the app's search.granularity, ladder)")
    parser.add_argument("--tiling", choices=["parts", "tiles", "both"],
                        help="fused tiling of layer groups (MAFAT / DeepThings, docs/tiling.md): "
                             "search tiled groups alone (tiles) or with the per-layer genes (both: "
                             "after the parts and tiles searches, seeded with their fronts); "
                             "parts = the tiling search space without tiling genes")
    parser.add_argument("--prefer", choices=["memory", "fps"],
                        help="which point of the front: the least memory or the highest "
                             "throughput meeting the constraints (default: the fastest within "
                             "--mem when it is the only constraint, else the least memory; "
                             "docs/search.md)")
    parser.add_argument("--time-limit", type=float, dest="time_limit",
                        help="seconds for the whole run: every stage of the search stops with "
                             "the front found so far and every output is written (default: the "
                             "app's search.time_limit, else 100 with --effort auto, none with "
                             "--effort full)")
    parser.add_argument("--cluster", metavar="ADDRESS",
                        help="evaluate chromosomes on the Dask cluster whose scheduler is at "
                             "ADDRESS, e.g. tcp://host:8786 (same front as one process; "
                             "docs/search.md)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    from explorer.cli.baselines import add_placement
    add_placement(parser)


def out_dir(args: argparse.Namespace, app_name: str) -> Staged:
    """The directory to write, claimed before the search runs."""
    if args.out:
        return claim_dir(args.out, args.force)
    return claim_new_dir("runs", safe_name(app_name))


def settings_of(app, args: argparse.Namespace):
    s = app.search
    if getattr(args, "granularity", None):
        s = replace(s, granularity=args.granularity)
    from explorer.app.appfile import SEARCH_LIMITS, time_limit
    if getattr(args, "cluster", None):
        s = replace(s, cluster=args.cluster.strip())
    if getattr(args, "effort", None):
        s = replace(s, effort=args.effort)
    if getattr(args, "time_limit", None) is not None:
        s = replace(s, time_limit=time_limit(args.time_limit, "--time-limit"))
    for key in ("seed", "population", "generations", "workers", "relink_rounds", "local_rounds"):
        value = getattr(args, key, None)
        if value is not None:
            low = 1 if key in ("population", "generations") else 0
            if not low <= value <= SEARCH_LIMITS[key]:
                raise InputError(f"--{key.replace('_', '-')}: expected a {'non-negative' if low == 0 else 'positive'}"
                                 f" integer up to {SEARCH_LIMITS[key]}, got {value}")
            s = replace(s, **{key: value})
            if key in ("population", "generations", "relink_rounds"):
                s = replace(s, fixed=tuple(dict.fromkeys(s.fixed + (key,))))
    return s


SHOW = 16                   # layers by parts named in the summary (all are in plan.json)
LABELS = {"none": "no reduction", "pisarchyk": "Pisarchyk & Lee [23]",
          "reuse": "reuse only (Algorithm 1)", "all_parts": "all layers by parts [17]",
          "lower_bound": "lower bound (this plan's schedule)"}


def baselines_for(app, evaluator, derived=None) -> list:
    """The rows of `explore baselines` as report marks, with the fps the evaluator predicts
    for their phases (none for the lower bound, and for Pisarchyk & Lee on a pipelined app:
    it treats the pipeline as sequential stages, which the evaluator does not time). With
    `derived` (the chosen plan's derivation) the lower bound is that plan's own: the most
    bytes alive at once under its schedules, so the plan never sits below it."""
    from explorer.plan.derive import uniform_phases
    from explorer.report.pareto import Baseline
    try:
        from explorer.report.baselines import baselines
    except ImportError:
        return []
    whole = evaluator.fps(uniform_phases(app, False))
    pipelined = any(len(group) > 1 for group in app.pipelines)
    fps = {"none": whole, "reuse": whole, "pisarchyk": {} if pipelined else whole,
           "all_parts": evaluator.fps(uniform_phases(app, True)), "lower_bound": {}}
    rows = baselines(app)
    rows.pop("all_parts_bound", None)
    if derived is not None:
        from explorer.report.baselines import lower_bound
        elements, _ = lower_bound(derived.uses, app.pipelines)
        rows["lower_bound"] = replace(rows["lower_bound"], total_bytes=derived.param_bytes
                                      + elements * app.precision.data_bytes)
    return [Baseline(LABELS.get(name, name), int(row.total_bytes), fps.get(name, {}))
            for name, row in rows.items()]


def summary(app, plan, outcome, evaluator_name: str, why: dict[str, str] | None = None) -> list[str]:
    """The lines `explore` prints; `why`: per CNN, the stage that sets its frame time
    (explorer/throughput/bottleneck.py), named beside a missed throughput target."""
    from explorer.report.gene_strip import layer_notation
    r = outcome.result
    lines = [f"app {app.name}: {len(app.cnns)} CNN(s), {len(app.partitions)} partition(s), "
             f"precision {app.precision.name}, evaluator {evaluator_name}, "
             f"placement {app.placement}"]
    if r.early_exit:
        lines.append("search: early exit, buffer reuse alone (every layer one phase) fits M^c"
                     if app.memory is not None else "search: none needed, no constraint asks "
                     "for less memory than buffer reuse alone (every layer one phase)")
    else:
        rate = r.evaluations / r.seconds if r.seconds else 0.0
        lines.append(f"search: NSGA-II {r.generations} generations, {r.evaluations} evaluations "
                     f"({r.unique} unique) in {r.seconds:.1f} s ({rate:.0f}/s); "
                     f"front {len(outcome.front)} points")
        if r.stopped:
            lines.append(f"search: stopped on time at {r.stopped} (the time limit); the plan "
                         f"is from the front found so far")
    mem_c = app.memory
    mem_ok = not mem_c or plan.memory_bytes <= mem_c
    lines.append(f"memory  {format_bytes(plan.memory_bytes)} ({plan.memory_bytes} B: params "
                 f"{format_bytes(plan.param_bytes)} + buffers {format_bytes(plan.buffer_bytes)}"
                 + (f" + workspace {format_bytes(plan.workspace_bytes)}" if plan.workspace_bytes else "")
                 + (f" + sessions {format_bytes(plan.session_bytes)}" if plan.session_bytes else "")
                 + (f" + outputs {format_bytes(plan.output_bytes)}" if plan.output_bytes else "")
                 + ")"
                 + ("" if mem_c is None else "  the least memory: the goal" if mem_c == 0 else
                    f"  M^c {format_bytes(mem_c)}: {'met' if mem_ok else 'NOT met'}"))
    for cnn, v in plan.fps.items():
        need = app.fps.get(cnn, 0.0)
        tail = f"  T^c {need:g}: {'met' if v >= need else 'NOT met'}" if need else ""
        if need and v < need and (why or {}).get(cnn):
            tail += f" (the frame time is {why[cnn]})"
        lines.append(f"fps     {cnn}: {v:.2f}{tail}")
    for cnn, ph in plan.phases.items():
        rows = plan.rows.get(cnn, {})
        split = [layer_notation(layer, rows.get(layer, 1)) for layer, n in ph.items() if n > 1]
        shown = ", ".join(split[:SHOW]) + (f", ... ({len(split) - SHOW} more)"
                                           if len(split) > SHOW else "")
        lines.append(f"by parts {cnn}: {len(split)} of {len(ph)} layers"
                     + (f": {shown}" if split else ""))
    from explorer.search.pick import describe_rule
    lines.append("picked  " + (describe_rule(outcome.rule, app.prefer, app.memory) if outcome.met else
                               "the least-memory point: no point meets the constraints"))
    lines.append("constraints " + ("met" if plan.constraints_met else
                                   "NOT met by any point of the front (least-memory plan written)"))
    return lines


def run(args: argparse.Namespace) -> int:
    from explorer.app.appfile import load_app

    staged = claim_dir(args.out, args.force) if args.out else None   # before any work
    try:
        app = load_app(args.app, mem=args.mem, fps=args.fps, precision=args.precision,
                       prefer=args.prefer)
        app.placement = args.placement
        settings = settings_of(app, args)
        staged = staged or out_dir(args, app.name)
    except BaseException:
        if staged is not None:
            staged.discard()
        raise
    with staged as out:
        notes, xml, met = _explore(app, settings, args, out)
    for line in notes:
        print(line)
    print(f"wrote {staged.final}/: plan.json, pareto.json, pareto.csv, report.html, "
          + ", ".join(p.name for p in xml))
    return 0 if met else 3


def evaluator_for(app, spec: str | None, quiet: bool):
    """The throughput evaluator of a run: the profile `spec` names (explorer/throughput/
    evaluator.py), with `platform: cpu` this machine's profile, measured on the spot or
    taken from the cache of measured profiles (explorer/cli/cpu_profile.py)."""
    from explorer.cli.cpu_profile import cpu_profile
    from explorer.throughput.evaluator import make_evaluator
    measured = (cpu_profile(app, quiet=quiet) if app.platform == "cpu"
                and spec in (None, "", "profile", "measured") else None)
    return make_evaluator(app, spec, measured)


def plan_on_platform(problem, evaluator, genes, fps: dict[str, float], met: bool):
    """The plan of a chromosome (problem.plan), marked with the platform its fps were
    predicted for (`explore run` warns when that is not the machine it runs on)."""
    from explorer.cli.cpu_profile import platform_name
    return replace(problem.plan(genes, fps, met),
                   platform=platform_name(evaluator.profile, problem.app.platform))


def problem_for(app, evaluator, settings, tiling: str | None):
    """The search problem (explorer/search/problem.py) of a run: layer genes, or with
    `--tiling` layer and fused-tile genes (explorer/tiling/genes.py), and the search that
    solves it: Algorithm 2, or for `--tiling both` the search seeded with the parts and
    tiles searches' fronts (explorer/tiling/search.py)."""
    from explorer.search.algorithm2 import algorithm2
    if not tiling:
        from explorer.plan.derive import Evaluation
        from explorer.plan.genes import gene_space
        return Evaluation(app, evaluator, space=gene_space(app, settings.granularity)), algorithm2
    from explorer.tiling.genes import TiledEvaluation
    from explorer.tiling.search import combined_search
    problem = TiledEvaluation(app, evaluator, tiling, settings.granularity)
    return problem, combined_search if tiling == "both" else algorithm2


def _explore(app, settings, args: argparse.Namespace, out: Path):
    """The search and the files of DIR, written into `out`; (summary lines, XML paths, met)."""
    import time

    from explorer.plan.model import to_json
    from explorer.report.pareto import write_pareto_csv, write_pareto_json, write_report_html
    from explorer.search.deadline import Deadline
    from explorer.search.effort import fit_effort, time_budget
    from explorer.search.progress import StageTime, stage_line, stderr_progress

    evaluator = evaluator_for(app, args.evaluator, args.quiet)
    deadline = Deadline(time_budget(settings))          # the search's, from here
    problem, search = problem_for(app, evaluator, settings, getattr(args, "tiling", None))
    bound = bounds(problem)
    if not args.quiet:
        print(bound, file=sys.stderr, flush=True)
    started = time.perf_counter()
    settings, effort = fit_effort(app, problem, settings)
    fitting = time.perf_counter() - started
    outcome = search(app, problem, settings, None if args.quiet else stderr_progress,
                     deadline=deadline)
    started = time.perf_counter()
    chosen = outcome.chosen
    derived = problem.derive(chosen.genes)
    plan = plan_on_platform(problem, evaluator, chosen.genes, chosen.fps, outcome.met)
    cnns = list(app.cnns)
    r = outcome.result
    strips, by_parts = gene_cells(problem, outcome.front)
    write_pareto_json(outcome.front, cnns, outcome.genes, out / "pareto.json", extra={
        "app": plan.app, "name": app.name, "early_exit": r.early_exit, "seed": settings.seed,
        "population": settings.population, "generations": settings.generations,
        "granularity": settings.granularity, "relink_rounds": settings.relink_rounds,
        "precision": app.precision.name, "placement": app.placement,
        "evaluator": args.evaluator, "tiling": getattr(args, "tiling", None),
        "local_rounds": settings.local_rounds,
        "evaluations": r.evaluations, "unique": r.unique, "seconds": round(r.seconds, 3),
        "constraints": plan.constraints.to_dict(), "chosen": list(chosen.genes),
        "rule": outcome.rule, "prefer": app.prefer,
        "time_limit": settings.time_limit, "stopped_on_time": r.stopped,
        "constraints_met": plan.constraints_met,
        "effort": effort.as_json() if effort is not None else None}, by_parts=by_parts)
    write_pareto_csv(outcome.front, cnns, outcome.genes, out / "pareto.csv", by_parts)
    to_json(plan, out / "plan.json")
    xml = write_partitions(app, plan, out, evaluator)
    notes = summary(app, plan, outcome, evaluator.name, missed_targets(app, plan, evaluator))
    notes.insert(1, bound)
    if effort is not None and effort.level < 1:
        notes.insert(1, f"effort  {effort.level:g} of the default (population {effort.population}, "
                        f"generations {effort.generations}, relinking {effort.relink_rounds}): the "
                        f"default would take about {effort.predicted_s:.0f} s at the {effort.rate:.0f} "
                        f"evaluations/s measured here; set them, or --effort full, to fix the effort")
    write_report_html(out / "report.html", f"memtrade: {app.name}", outcome.front, cnns,
                      outcome.genes, app.memory, app.fps, baselines_for(app, evaluator, derived), chosen,
                      outcome.met, notes, memory_pictures(problem, plan, derived),
                      strips, by_parts)
    stages = ([StageTime("effort", fitting)] if effort is not None else []) + r.stages \
        + [StageTime("outputs", time.perf_counter() - started)]
    budget = "" if deadline.seconds is None else f" (time budget {deadline.seconds:g} s)"
    return notes + [stage_line(stages) + budget], xml, outcome.met


def memory_pictures(problem, plan, derived) -> list[tuple[str, dict[str, str]]]:
    """report.html's pictures of the arena over the schedule (explorer/report/memory_svg.py):
    the chosen plan's, and beside it the reuse-only plan's (all genes 0: every layer whole)."""
    from explorer.report.memory_svg import plan_pictures

    zeros = (0,) * len(problem.space.upper)
    whole = problem.derive(zeros)
    reuse = problem.plan(zeros, {}, False)
    return [(f"chosen plan ({format_bytes(plan.buffer_bytes)} of buffers)", plan_pictures(plan, derived)),
            (f"reuse only ({format_bytes(reuse.buffer_bytes)} of buffers)", plan_pictures(reuse, whole))]


def gene_cells(problem, front) -> tuple[list[str] | None, list[list[str]] | None]:
    """Per front point: its genes as a strip and its layers by parts in the `layer:k`
    notation (explorer/report/gene_strip.py); (None, None) for genes that are not layer
    granularities alone (fused tiles)."""
    from explorer.plan.genes import GeneSpace
    from explorer.report.gene_strip import gene_strip, layer_notation

    space = problem.space
    if not isinstance(space, GeneSpace):
        return None, None
    labels = [f"{c}.{layer}" for c, layer in space.layers]
    strips, notes = [], []
    for p in front:
        cells = [(label, ladder[g] if g else 0, ladder[0])
                 for label, ladder, g in zip(labels, space.ladders, p.genes)]
        strips.append(gene_strip(cells))
        notes.append([layer_notation(label, rows) for label, rows, _ in cells if rows])
    return strips, notes


def bounds(problem) -> str:
    """The ends of the trade, printed before the search: the weights alone (every plan holds
    them) and the reuse-only plan's memory and fps (every layer whole, buffers reused)."""
    zeros = (0,) * len(problem.space.upper)
    memory, fps = problem(zeros)
    weights = problem.derive(zeros).param_bytes
    return (f"bounds  the weights alone {format_bytes(weights)} (no plan holds less); reuse only "
            f"(every layer whole) {format_bytes(memory)} at "
            + ", ".join(f"{c} {v:.2f} fps" for c, v in fps.items()))


def missed_targets(app, plan, evaluator) -> dict[str, str]:
    """Per CNN whose plan misses its fps target: the stage that sets its frame time."""
    if all(plan.fps.get(c, 0.0) >= need for c, need in app.fps.items() if need):
        return {}
    from explorer.throughput.bottleneck import bottlenecks
    return {c: b.line() for c, b in bottlenecks(evaluator, plan.phases).items()}

"""What `explore` says about an exploration: the summary lines it prints (memory against
M^c, fps against each T^c and the stage that sets a missed one, the layers by parts, the
rule that picked the plan), the paper's baselines as report marks, and the pictures and gene
strips of report.html."""
from __future__ import annotations

from dataclasses import replace

from explorer.app.units import format_bytes


SHOW = 16                   # layers by parts named in the summary (all are in plan.json)
LABELS = {"none": "no reduction", "pisarchyk": "Pisarchyk & Lee [23]",
          "reuse": "reuse only (Algorithm 1)", "all_parts": "all layers by parts [17]",
          "lower_bound": "lower bound (this plan's schedule)"}


def baseline_rows(app, cache=None) -> dict:
    """The rows of `explore baselines` the report marks (explorer/report/baselines.py; the
    all-parts bound left out), none of which depends on the search: a run with a time budget
    makes them before the search. `cache`: the search problem's RunCache, which their
    derivations share; {} where the baselines are not installed."""
    try:
        from explorer.report.baselines import baselines
    except ImportError:
        return {}
    return baselines(app, cache=cache, all_parts_bound=False)


def baselines_for(app, evaluator, derived=None, cache=None, rows: dict | None = None) -> list:
    """The rows of `explore baselines` as report marks, with the fps the evaluator predicts
    for their phases (none for the lower bound, and for Pisarchyk & Lee on a pipelined app:
    it treats the pipeline as sequential stages, which the evaluator does not time). With
    `derived` (the chosen plan's derivation) the lower bound is that plan's own: the most
    bytes alive at once under its schedules, so the plan never sits below it. `rows`:
    `baseline_rows` made earlier (else made here with `cache`)."""
    from explorer.plan.derive import uniform_phases
    from explorer.report.pareto import Baseline
    rows = dict(baseline_rows(app, cache) if rows is None else rows)
    if not rows:
        return []
    whole = evaluator.fps(uniform_phases(app, False))
    pipelined = any(len(group) > 1 for group in app.pipelines)
    fps = {"none": whole, "reuse": whole, "pisarchyk": {} if pipelined else whole,
           "all_parts": evaluator.fps(uniform_phases(app, True)), "lower_bound": {}}
    if derived is not None:
        from explorer.report.baselines import lower_bound
        elements, _ = lower_bound(derived.uses, app.pipelines)
        rows["lower_bound"] = replace(rows["lower_bound"], total_bytes=derived.param_bytes
                                      + elements * (1 if derived.layers is not None      # bytes
                                                    else app.precision.data_bytes))
    return [Baseline(LABELS.get(name, name), int(row.total_bytes), fps.get(name, {}))
            for name, row in rows.items()]


def summary(app, plan, outcome, evaluator_name: str, why: dict[str, str] | None = None) -> list[str]:
    """The lines `explore` prints; `why`: per CNN, the stage that sets its frame time
    (explorer/throughput/bottleneck.py), named beside a missed throughput target."""
    from explorer.report.gene_strip import layer_notation
    r = outcome.result
    lines = [f"app {app.name}: {len(app.cnns)} CNN(s), {len(app.partitions)} partition(s), "
             f"precision {'auto (per layer)' if app.precisions else app.precision.name}, "
             f"evaluator {evaluator_name}, "
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
    for cnn, chosen in plan.layer_precisions.items():
        counts = {p: sum(1 for v in chosen.values() if v == p) for p in ("int8", "fp16", "fp32")}
        estimate, measured = plan.sqnr_estimate_db.get(cnn), plan.sqnr_reference_db.get(cnn)
        lines.append(f"precision {cnn}: " + ", ".join(f"{n} {p}" for p, n in counts.items() if n)
                     + " layers" + ("" if estimate is None else f"; SQNR estimate {estimate:.1f} dB")
                     + ("" if app.min_sqnr_db is None else f" (min_sqnr_db {app.min_sqnr_db:g})")
                     + ("" if measured is None else f", measured {measured:.1f} dB on the network "
                        f"rounded as this plan rounds it (calibration frames)"))
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
    from explorer.plan.precision_genes import PrecisionSpace
    from explorer.report.gene_strip import gene_strip, layer_notation, precision_strip

    space = problem.space
    per_layer = isinstance(space, PrecisionSpace)    # granularity genes, then precisions
    granularity = space.base if per_layer else space
    if not isinstance(granularity, GeneSpace):
        return None, None
    labels = [f"{c}.{layer}" for c, layer in granularity.layers]
    strips, notes = [], []
    for p in front:
        genes = space.split(p.genes)[0] if per_layer else p.genes
        cells = [(label, ladder[g] if g else 0, ladder[0])
                 for label, ladder, g in zip(labels, granularity.ladders, genes)]
        strip = gene_strip(cells)
        if per_layer:             # the precisions the plan has (after the SQNR repair)
            chosen = problem.layers(p.genes)
            strip += precision_strip([(f"{c}.{l}", chosen.name(c, l)) for c, l in space.layers])
        strips.append(strip)
        notes.append([layer_notation(label, rows) for label, rows, _ in cells if rows])
    return strips, notes


def missed_targets(app, plan, evaluator) -> dict[str, str]:
    """Per CNN whose plan misses its fps target: the stage that sets its frame time."""
    if all(plan.fps.get(c, 0.0) >= need for c, need in app.fps.items() if need):
        return {}
    from explorer.throughput.bottleneck import bottlenecks
    return {c: b.line() for c, b in bottlenecks(evaluator, plan.phases).items()}


def summary_lines(ex) -> list[str]:
    """The lines `explore` prints for exploration `ex` (memtrade.Exploration), before the
    stage times: the summary with the bounds after its first line and, when the effort was
    fitted below the default, what it chose."""
    w = ex._work
    notes = summary(ex.app, ex.plan, w.outcome, ex.evaluator_name,
                    missed_targets(ex.app, ex.plan, w.evaluator))
    notes.insert(1, ex.bounds_line)
    effort = ex.effort
    if effort is not None and effort.level < 1:
        notes.insert(1, f"effort  {effort.level:g} of the default (population {effort.population}, "
                        f"generations {effort.generations}, relinking {effort.relink_rounds}): the "
                        f"default would take about {effort.predicted_s:.0f} s at the {effort.rate:.0f} "
                        f"evaluations/s measured here; set them, or --effort full, to fix the effort")
    return notes

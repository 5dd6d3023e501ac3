"""The search problem of an application: its throughput evaluator, its genes and the search
that solves them, and the plan of any chromosome marked with the platform it was planned for.

`explore` (memtrade/exploration.py) and `deploy --point N` (memtrade/front_point.py) build the
same problem from the same settings, so the plan of a front point derived again later is the
plan the search would have written for it.
"""
from __future__ import annotations

from dataclasses import replace

from explorer.app.units import format_bytes
from sdf3.errors import InputError


def evaluator_for(app, spec: str | None, quiet: bool = True):
    """The throughput evaluator of a run: the profile `spec` names (explorer/throughput/
    evaluator.py), with `platform: cpu` this machine's profile, measured on the spot or
    taken from the cache of measured profiles (memtrade/platform.py); with `precision: auto`
    one profile per precision a layer may take, each layer's times and runtime bytes read
    from its own precision's."""
    from explorer.throughput.evaluator import make_evaluator
    from memtrade.platform import cpu_profile
    here = app.platform == "cpu" and spec in (None, "", "profile", "measured")
    measured = cpu_profile(app, quiet=quiet) if here else None
    others = {}
    if here and app.precisions:      # precision: auto: each layer's steps at each precision
        from explorer.app.model import PRECISIONS
        others = {p: cpu_profile(replace(app, precision=PRECISIONS[p], precisions=()), quiet=quiet)
                  for p in app.precisions if p != app.precision.name}
    return make_evaluator(app, spec, measured, others)


def plan_on_platform(problem, evaluator, genes, fps: dict[str, float], met: bool):
    """The plan of a chromosome (problem.plan), marked with the platform its fps were
    predicted for (`explore run` warns when that is not the machine it runs on)."""
    from memtrade.platform import platform_name
    return replace(problem.plan(genes, fps, met),
                   platform=platform_name(evaluator.profile, problem.app.platform))


def problem_for(app, evaluator, settings, tiling: str | None, tables=None):
    """The search problem (explorer/search/problem.py) of a run: layer genes, or with
    `tiling` layer and fused-tile genes (explorer/tiling/genes.py), and the search that
    solves it: Algorithm 2, or for tiling "both" the search seeded with the parts and
    tiles searches' fronts (explorer/tiling/search.py). An app of `precision: auto` has a
    precision gene per layer too (explorer/plan/precision_genes.py), estimated by `tables`
    (memtrade/sensitivity.py)."""
    from explorer.search.algorithm2 import algorithm2
    if app.precisions:
        if tiling:
            raise InputError(f"--tiling {tiling}: precision: auto has layer genes only; "
                             f"expected no --tiling with it")
        if tables is None:
            raise InputError("precision: auto: the search needs each CNN's sensitivity table "
                             "(explore APP --calibration FRAMES measures it)")
        from explorer.plan.genes import gene_space
        from explorer.plan.precision_genes import PrecisionEvaluation
        return PrecisionEvaluation(app, evaluator, gene_space(app, settings.granularity), tables), algorithm2
    if not tiling:
        from explorer.plan.derive import Evaluation
        from explorer.plan.genes import gene_space
        return Evaluation(app, evaluator, space=gene_space(app, settings.granularity)), algorithm2
    from explorer.tiling.genes import TiledEvaluation
    from explorer.tiling.search import combined_search
    problem = TiledEvaluation(app, evaluator, tiling, settings.granularity)
    return problem, combined_search if tiling == "both" else algorithm2


def bounds(problem) -> str:
    """The ends of the trade, printed before the search: the weights alone (every plan holds
    them) and the reuse-only plan's memory and fps (every layer whole, buffers reused)."""
    zeros = (0,) * len(problem.space.upper)
    memory, fps = problem(zeros)
    least = getattr(problem, "least_param_bytes", None)   # precisions per layer: all at the least
    weights = least() if least is not None else problem.derive(zeros).param_bytes
    return (f"bounds  the weights alone {format_bytes(weights)} (no plan holds less); reuse only "
            f"(every layer whole) {format_bytes(memory)} at "
            + ", ".join(f"{c} {v:.2f} fps" for c, v in fps.items()))

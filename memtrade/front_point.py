"""`explore deploy PLAN.json --point N`: the plan of any point of the Pareto front.

`explore APP.yaml` writes the chosen point's plan.json and, beside it, pareto.json with every
point's genes and what the search ran with (the app file, precision, placement, granularity,
fused tiling, evaluator). The plan of point N is derived again from those: the same problem
(memtrade/problem.py `problem_for`) and the same derivation as the chosen point's, so
point N's plan is the plan `explore` would have written had it picked N. Every field of
the file is checked against the app first (memtrade/front_check.py).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from sdf3.errors import InputError


def pareto_beside(path: str | Path) -> Path:
    """pareto.json itself, or the one beside a plan.json."""
    from explorer.app.input_file import not_regular
    path = Path(path)
    front = path if path.name == "pareto.json" else path.with_name("pareto.json")
    if not front.is_file():
        found = not_regular(front)
        raise InputError(f"{path}: --point needs the pareto.json that `explore` wrote beside "
                         f"the plan ({front} is {found or 'missing'})")
    return front


def plan_of_point(path: str | Path, n: int, warn: Callable[[str], None] | None = None):
    """The plan (explorer.plan.model.Plan) of point `n` of the front in or beside `path`,
    every field checked first (memtrade/front_check.py); `warn` hears when the point's
    listed fps are not the ones its genes give (the plan carries the latter)."""
    from dataclasses import replace

    from explorer.app.appfile import load_app
    from explorer.app.input_file import read_json
    from memtrade.front_check import (WRITTEN_BY, checked_genes, front_file, point_figures,
                                      point_index, recomputed_fps, same_app)
    from memtrade.problem import evaluator_for, plan_on_platform, problem_for
    from explorer.search.pick import Point, meets

    where = pareto_beside(path)
    front = front_file(read_json(where, WRITTEN_BY), str(where))
    n = point_index(n, len(front.points), str(where))
    listed = point_figures(front.points[n], n, str(where))
    app = load_app(front.app, precision=front.precision)
    app.memory = front.memory_bytes
    app.fps = dict(front.fps or app.fps)
    app.placement = front.placement
    settings = replace(app.search, granularity=front.granularity)
    evaluator = evaluator_for(app, front.evaluator, quiet=True)
    problem, _ = problem_for(app, evaluator, settings, front.tiling)
    same_app(front, app, tuple(problem.space.labels))
    genes = checked_genes(list(listed.genes), problem.space.labels, problem.space.upper,
                          f"{where}: points[{n}]")
    fps = recomputed_fps(problem, genes, listed.fps, f"{where}: point {n}", warn)
    met = meets(Point(genes, listed.memory_bytes, fps), app.memory, app.fps)
    plan = plan_on_platform(problem, evaluator, genes, fps, met)
    if plan.memory_bytes != listed.memory_bytes:
        raise InputError(f"{where}: point {n} derives to {plan.memory_bytes} B, not the "
                         f"{listed.memory_bytes} B it lists (the app or its models changed "
                         f"since `explore` ran, or the file was edited); run `explore` again")
    return plan

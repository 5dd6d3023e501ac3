"""`explore deploy PLAN.json --point N`: the plan of any point of the Pareto front.

`explore APP.yaml` writes the chosen point's plan.json and, beside it, pareto.json with every
point's genes and what the search ran with (the app file, precision, placement, granularity,
fused tiling, evaluator). The plan of point N is derived again from those: the same problem
(memtrade/problem.py `problem_for`) and the same derivation as the chosen point's, so
point N's plan is the plan `explore` would have written had it picked N.
"""
from __future__ import annotations

import json
from pathlib import Path

from sdf3.errors import InputError


def pareto_beside(path: str | Path) -> Path:
    """pareto.json itself, or the one beside a plan.json."""
    path = Path(path)
    front = path if path.name == "pareto.json" else path.with_name("pareto.json")
    if not front.is_file():
        raise InputError(f"{path}: --point needs the pareto.json that `explore` wrote beside "
                         f"the plan ({front} is missing)")
    return front


def plan_of_point(path: str | Path, n: int):
    """The plan (explorer.plan.model.Plan) of point `n` of the front in or beside `path`."""
    from dataclasses import replace

    from explorer.app.appfile import load_app
    from memtrade.problem import evaluator_for, plan_on_platform, problem_for
    from explorer.search.pick import Point, meets

    where = pareto_beside(path)
    try:
        front = json.loads(where.read_text())
        points, app_path = front["points"], front["app"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise InputError(f"{where}: not a pareto.json written by `explore APP.yaml` ({err})") from None
    if not 0 <= n < len(points):
        raise InputError(f"--point: expected 0 to {len(points) - 1} (the points of {where}), got {n}")
    if "precision" not in front:
        raise InputError(f"{where}: written before --point was possible; run `explore` again")
    cons = front.get("constraints") or {}
    app = load_app(app_path, precision=front["precision"])
    app.memory, app.fps = cons.get("memory_bytes"), dict(cons.get("fps") or app.fps)
    app.placement = front["placement"]
    settings = replace(app.search, granularity=front["granularity"])
    evaluator = evaluator_for(app, front.get("evaluator"), quiet=True)
    problem, _ = problem_for(app, evaluator, settings, front.get("tiling"))
    point = points[n]
    genes = tuple(int(g) for g in point["genes"])
    fps = {c: float(v) for c, v in point["fps"].items()}
    met = meets(Point(genes, int(point["memory_bytes"]), fps), app.memory, app.fps)
    plan = plan_on_platform(problem, evaluator, genes, fps, met)
    if plan.memory_bytes != point["memory_bytes"]:
        raise InputError(f"{where}: point {n} derives to {plan.memory_bytes} B, not the "
                         f"{point['memory_bytes']} B it lists (the app or its models changed "
                         f"since `explore` ran); run `explore` again")
    return plan

"""`memtrade.primitives`: TASO's primitive selection (explorer/primitives/ilp.py) for an app,
on primitives measured on this machine (deploy/profile/primitives.py) or read from a profile
(`explore profile APP --primitives`): the exact fronts, the greedy and time-only points, the
GA comparison, and a deployable plan (every layer whole, buffers by Algorithm 1, the chosen
primitive per layer, the chosen steps' measured workspaces as its workspace term). With M^c:
the fastest plan within it (Eq. 13); with T^c: the least memory at that speed (Eq. 14, or
Eq. 15 with strategy "workspace"); neither: time-only."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from explorer.app.model import Application
from explorer.plan.model import Plan
from sdf3.errors import InputError


@dataclass(frozen=True)
class Primitives:
    """The study (explorer.primitives.study: its lines, fronts as JSON, the chosen point,
    whether it meets the constraints), its cost model and the plan of the chosen point."""
    costs: Any
    result: dict
    plan: Plan

    @property
    def met(self) -> bool:
        return bool(self.result["met"])


def measured_table(app: Application, profile: str | None, repeats: int, threads: int) -> dict:
    """Per CNN, the measured primitives: from `profile` or measured now."""
    if profile:
        from explorer.throughput.device_profile import load_profile
        table = load_profile(profile).primitives
        if not table:
            raise InputError(f"{profile}: no key 'primitives' (run `explore profile APP "
                             "--primitives --out FILE`)")
        return table
    from deploy.profile.primitives import profile_primitives
    dtype = {4: "float32", 2: "float16"}.get(app.precision.data_bytes)
    if dtype is None:
        raise InputError(f"{app.path or app.name}: precision {app.precision.name}: primitives are "
                         "measured in fp32 or fp16 only")
    return {name: profile_primitives(cnn, dtype, repeats, threads) for name, cnn in app.cnns.items()}


def primitives(app: Application, strategy: str = "sum", *, profile: str | None = None,
               repeats: int = 20, threads: int = 0, max_points: int = 200, seed: int = 0,
               ga_generations: int = 100) -> Primitives:
    """The primitive study of `app` under its constraints (module docstring)."""
    from explorer.plan.derive import derive, plan_for, uniform_phases
    from explorer.primitives.costs import from_profile
    from explorer.primitives.study import study
    if max_points < 1:
        raise InputError(f"--max-points: expected a positive integer, got {max_points}")
    if ga_generations < 1:
        raise InputError(f"--ga-generations: expected a positive integer, got {ga_generations}")
    derived = derive(app, uniform_phases(app, False))
    costs = from_profile(app, measured_table(app, profile, repeats, threads), derived.buffer_bytes,
                         profile or "measured profile")
    cnn_ms = {c: 1000.0 / v for c, v in app.fps.items() if v}
    result = study(costs, strategy, app.memory, cnn_ms, max_points, seed,
                   ga_generations=ga_generations)
    chosen = result["chosen"]
    # the plan's memory by memtrade's model, the chosen steps' measured workspaces as its
    # per-layer workspace term (explorer/throughput/runtime_costs.workspace_bytes: the largest step)
    with_ws = derive(app, uniform_phases(app, False), None, costs.workspace_tables(chosen["choice"]))
    plan = replace(plan_for(app, with_ws, {c: 1000.0 / ms for c, ms in chosen["ms"].items()},
                            result["met"]), primitives=costs.names(chosen["choice"]))
    return Primitives(costs, result, plan)

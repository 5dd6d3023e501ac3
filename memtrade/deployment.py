"""`memtrade.deploy`: a plan becomes a deployment directory (deploy/build/derive.py): step
models over one arena at the plan's precision, resolved schedules and, for TensorRT, the
engines or the board runner that builds them (paper Section 7; docs/deploy.md).

>>> import memtrade                                              # doctest: +SKIP
>>> found = memtrade.explore("apps/table13_mobilenet_sequential.yaml", mem="8MB", fps=71)
>>> memtrade.deploy(found, "dep")                                # the chosen plan
Deployment(path=PosixPath('dep'), ...)
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from explorer.plan.model import Plan
from sdf3.errors import InputError


@dataclass(frozen=True)
class Deployment:
    """What `deploy` wrote: the directory, its backend, step models, steps, the arena's bytes
    (host and device) and the lines the backend's build step said (engines built, or where
    they will be)."""
    path: Path
    name: str
    backend: str
    models: int
    steps: int
    arena_bytes: int
    device_arena_bytes: int
    notes: tuple[str, ...] = ()


def unmet_constraints(plan: Plan) -> str:
    """Which of the plan's constraints it misses, in words ("" when met or none)."""
    if plan.constraints_met:
        return ""
    out = []
    mem = plan.constraints.memory_bytes
    if mem is not None and plan.memory_bytes > mem:
        out.append(f"memory {plan.memory_bytes} B > {mem} B")
    for cnn, want in plan.constraints.fps.items():
        got = plan.fps.get(cnn)
        if want and got is not None and got < want:
            out.append(f"{cnn} {got:.1f} fps < {want:g} fps")
    return ", ".join(out) or "constraints_met is false"


def resolve_plan(plan, point: int | None = None, warn: Callable[[str], None] | None = None):
    """(plan, its application, where it came from) for `plan`: an Exploration (its chosen
    plan, or point `point` of its front), a Plan, or a plan.json / pareto.json path. A point
    is checked against the app (memtrade/front_check.py); `warn` hears when its listed fps
    are not the ones its genes give."""
    from explorer.app.appfile import load_app
    from explorer.plan.plan_file import from_json
    from memtrade.exploration import Exploration
    if isinstance(plan, Exploration):
        chosen = plan.plan if point is None else plan.plan_of(point, warn)
        return chosen, plan.app, plan.app.name
    if isinstance(plan, Plan):
        if point is not None:
            raise InputError("point: a Plan is one point already; give its Exploration or pareto.json")
        return plan, load_app(plan.app), plan.app
    if not isinstance(plan, (str, Path)):
        raise InputError(f"plan: expected an Exploration, a Plan or a plan.json path, "
                         f"got {type(plan).__name__}")
    if point is not None:
        from memtrade.front_point import plan_of_point
        chosen = plan_of_point(plan, point, warn)
    else:
        chosen = from_json(plan)
    return chosen, load_app(chosen.app), str(plan)


def deploy(plan, out: str | Path, backend: str = "onnxruntime",
           calibration: str | Path | None = None, *, steps: str = "regions",
           point: int | None = None, force: bool = False, with_profile: bool = False,
           warn: Callable[[str], None] | None = None,
           calibration_method: str | None = None) -> Deployment:
    """Deploy `plan` (an Exploration, a Plan, or a plan.json path; `point`: that point of the
    front instead of the chosen one) into directory `out` (refused when not empty, unless
    `force`), for `backend`. An int8 plan's scales are calibrated on `calibration` (frames
    .npy/.npz, [F, N, C, H, W] or [F, C, H, W]), else on generated frames, by ONNX Runtime's
    calibrator `calibration_method` (minmax, the default; entropy; percentile:
    deploy/quant/methods.py), or a QDQ model's own. `steps` "regions": consecutive firings by parts as one call per band; "layers": one
    call per layer and phase. `warn` hears each warning (a plan that misses its
    constraints, generated scales, an ignored calibration)."""
    from explorer.report.outputs import claim_dir
    from deploy.quant.methods import method
    if steps not in ("regions", "layers"):
        raise InputError(f"steps: expected regions or layers, got {steps!r}")
    if calibration_method is not None:
        method(calibration_method, "--calibration-method")
    warn = warn or (lambda line: None)
    with claim_dir(out, force) as tmp:      # claimed before any work
        chosen, app, where = resolve_plan(plan, point, warn)
        return _deploy(chosen, app, where, Path(out), tmp, backend, calibration, steps,
                       with_profile, warn, calibration_method)


def _deploy(plan: Plan, app, where: str, final: Path, out: Path, backend: str,
            calibration, steps: str, with_profile: bool, warn: Callable[[str], None],
            calibration_method: str | None = None) -> Deployment:
    from deploy.build.derive import check_backend, derive

    unmet = unmet_constraints(plan)
    if unmet:
        warn(f"plan {where} does not meet its constraints ({unmet}); deploying it anyway")
    check_backend(plan, backend, where)
    scales = None
    int8 = (any(p == "int8" for v in plan.layer_precisions.values() for p in v.values())
            if plan.layer_precisions else plan.data_bytes == 1)
    if plan.layer_precisions:
        from memtrade.sensitivity import calibration_warning
        differs = calibration_warning(plan, calibration, calibration_method)
        if differs:
            warn(f"plan {where}: {differs}")
    if int8:
        from deploy.build.quantization import deployment_scales
        scales = deployment_scales(app.cnns, Path(calibration) if calibration is not None else None,
                                   warn, calibration_method)
    else:
        for flag, given in (("--calibration", calibration), ("--calibration-method", calibration_method)):
            if given is not None:
                warn(f"{flag} is for int8 plans; plan {where} "
                     + ("has no int8 layer" if plan.layer_precisions else f"is {plan.precision}")
                     + ": ignored")
    manifest = derive(plan, app.cnns, out, backend, with_profile, where=where,
                      regions=steps == "regions", scales=scales)
    notes = tuple(_build(backend, out, manifest))
    return Deployment(final, manifest.name or Path(where).stem, backend, len(manifest.models),
                      sum(len(p.steps) for p in manifest.partitions), manifest.arena_bytes,
                      manifest.device_arena_bytes, notes)


def _build(backend: str, out: Path, manifest) -> list[str]:
    """The backend's own build after the step models (TensorRT engines, here or on the board)."""
    from deploy.backends import registry
    return registry.backend(backend).after_derive(out, manifest)

"""The sensitivity tables a `precision: auto` search estimates its error from: per CNN, the
table measured on calibration frames (deploy/checks/sensitivity.py), the user's
(`explore APP --calibration FILE`, read as `explore deploy --calibration` reads it) or
generated ones with a warning, taken from the cache when measured before."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from explorer.plan.sensitivity import Sensitivity
from sdf3.errors import InputError


def sensitivity_tables(app, calibration: str | Path | None = None, method: str | None = None,
                       say: Callable[[str], None] = lambda line: None,
                       cache_dir: str | Path | None = None) -> dict[str, Sensitivity]:
    """{cnn: table} of every CNN of `app`; `say` hears the warning about generated frames,
    and one line per CNN saying whether its table was measured or read from the cache."""
    from deploy.quant import calibration as calib
    from deploy.quant.methods import method as calibration_method
    from deploy.checks.sensitivity import SensitivityCache
    from explorer.throughput.profile_cache import cache_dir as default_dir

    chosen = calibration_method(method, "--calibration-method")
    cache = SensitivityCache(cache_dir if cache_dir is not None else default_dir())
    out, warned = {}, False
    for name, cnn in app.cnns.items():
        if cnn.source is None or cnn.quantized is not None:
            raise InputError(f"CNN {name}: precision: auto needs an fp32 ONNX model to measure "
                             f"each layer's sensitivity on, got "
                             + ("a quantized (QDQ) model" if cnn.source else "a zoo network"))
        frames, warning = calib.frames(None if calibration is None else Path(calibration), input_shape(cnn))
        if warning and not warned:
            say(warning)
            warned = True
        found = cache.table(cnn.source, cnn, frames, chosen.name)
        say(f"sensitivity: {name}: {len(found.table.rows)} rows on {len(frames)} frames, "
            + ("read from " if found.cached else "measured and kept in ") + str(found.path))
        out[name] = found.table
    return out


def reference_sqnr(app, plan, calibration: str | Path | None = None,
                   method: str | None = None) -> dict[str, float]:
    """Each CNN's output SQNR against fp32 (dB) of `plan`'s reference: the network rounded as
    a deployment of the plan's `layer_precisions` rounds it (deploy/checks/layer_reference.py),
    run by ONNX Runtime on the calibration frames its sensitivity table was measured on."""
    from deploy.checks.layer_reference import layer_reference
    from deploy.checks.sensitivity import outputs, sqnr_db
    from deploy.quant import calibration as calib
    from explorer.app.layer_precision import LayerPrecisions

    layers = LayerPrecisions.of(plan.layer_precisions)
    out = {}
    for name, cnn in app.cnns.items():
        frames, _ = calib.frames(None if calibration is None else Path(calibration), input_shape(cnn))
        int8 = any(layers.tensor(cnn, name, l).name == "int8" for l in cnn.order())
        scales = calib.activation_scales(cnn.source, cnn, frames, name, method=method) if int8 else None
        reference = layer_reference(cnn.source, cnn, name, layers, scales)
        out[name] = sqnr_db(outputs(reference, frames), outputs_of_source(cnn, frames))
    return out


def outputs_of_source(cnn, frames):
    """The fp32 model's outputs for each frame."""
    import onnx

    from csdf.onnx_inputs import with_shapes
    from deploy.checks.sensitivity import outputs
    model = onnx.load(str(cnn.source))
    with_shapes(model, dict(cnn.input_shapes))
    return outputs(model, frames)


def input_shape(cnn) -> tuple[int, ...]:
    """The CNN's one input shape, as the frames are read for it."""
    from csdf.model import INPUT
    return next(iter(cnn.input_shapes.values()), None) or next(
        tuple(int(v) for v in l.output_shape) for l in cnn.layers() if l.op == INPUT)


def frames_record(calibration: str | Path | None, method: str | None) -> dict[str, str]:
    """plan.json's `sqnr_frames`: the calibration file (its path and SHA-256, or "generated")
    and method a per-layer plan's SQNR figures were measured with."""
    from deploy.checks.files import digest
    from deploy.quant.methods import method as calibration_method
    name = calibration_method(method, "--calibration-method").name
    if calibration is None:
        return {"frames": "generated", "sha256": "", "method": name}
    path = Path(calibration).resolve()
    return {"frames": str(path), "sha256": digest(path), "method": name}


def calibration_warning(plan, calibration: str | Path | None, method: str | None) -> str | None:
    """A line when a per-layer `plan` is deployed with other frames or another method than
    its SQNR figures were measured with (`sqnr_frames`), else None."""
    if not plan.sqnr_frames:
        return None
    now = frames_record(calibration, method)
    was = plan.sqnr_frames
    if (now["sha256"], now["method"]) == (was.get("sha256"), was.get("method")):
        return None
    said = lambda r: "generated frames" if r.get("frames") == "generated" else r.get("frames")  # noqa: E731
    figures = ", ".join(f"{c} {v:.1f} dB" for c, v in plan.sqnr_reference_db.items())
    return (f"the plan's precisions and SQNR ({figures}) were measured with int8 scales from "
            f"{said(was)} by {was.get('method')}; deployed with scales from {said(now)} by "
            f"{now['method']}, its SQNR may differ: give the --calibration and "
            f"--calibration-method explore had")


ROUNDS = 3          # measured checks of the chosen plan, each raising the repair's floor
HALVINGS = 2        # then halvings of the raise, keeping the least that still measures


def checked(app, problem, outcome, plan_of, calibration=None, method=None,
            say: Callable[[str], None] = lambda line: None):
    """(outcome, plan) with the chosen plan's SQNR measured on its reference
    (`reference_sqnr`) at or above `app.min_sqnr_db`. While it measures below, the repair's
    floor is raised (`problem.tighten`) by as much as the estimate stood above the
    measurement, and at least by the shortfall more than before, the front's points are
    evaluated again under it and the point is picked again by the same rule, up to ROUNDS
    times; then the raise is bisected HALVINGS times between the last margin that fell short
    and the first that met, and the least margin whose plan measures at or above
    min_sqnr_db is kept (its front, its plan). The plan records its measurement.
    `plan_of(point, met)` makes a point's plan."""
    from dataclasses import replace

    from explorer.search.pick import Point, pick

    def measured_plan(o):
        plan = plan_of(o.chosen, o.met)
        return replace(plan, sqnr_reference_db=reference_sqnr(app, plan, calibration, method),
                       sqnr_frames=frames_record(calibration, method))

    def shortfall(plan) -> float:
        return max((app.min_sqnr_db - v for v in plan.sqnr_reference_db.values()), default=0.0)

    def attempt(margin: float):
        problem.tighten(margin)
        front = []
        for p in outcome.front:
            memory, fps = problem(p.genes)
            front.append(Point(p.genes, int(memory), dict(fps)))
        chosen, met = pick(front, app.memory, app.fps, app.prefer)
        o = replace(outcome, front=front, chosen=chosen, met=met)
        return o, measured_plan(o)

    plan = measured_plan(outcome)
    if app.min_sqnr_db is None or shortfall(plan) <= 0:
        return outcome, plan
    lo = margin = 0.0
    found = None
    for _ in range(ROUNDS):
        short = shortfall(plan)
        gap = max(plan.sqnr_estimate_db[c] - v for c, v in plan.sqnr_reference_db.items()
                  if v < app.min_sqnr_db)
        lo, margin = margin, max(margin + short, gap)
        say(f"precision auto: the chosen plan measures {short:.1f} dB below min_sqnr_db; the "
            f"repair now asks {margin:.1f} dB more and the front is evaluated again")
        tried, plan = attempt(margin)
        if shortfall(plan) <= 0:
            found = (margin, tried, plan)
            break
    if found is None:
        say(f"precision auto: the plan's SQNR measures {shortfall(plan):.1f} dB below "
            f"min_sqnr_db after {ROUNDS} tightenings of the estimate")
        return tried, plan
    hi = margin
    for _ in range(HALVINGS):           # the least raise that still measures
        mid = (lo + hi) / 2
        tried, plan = attempt(mid)
        if shortfall(plan) <= 0:
            found, hi = (mid, tried, plan), mid
        else:
            lo = mid
    margin, tried, plan = found
    problem.tighten(margin)
    say(f"precision auto: the repair asks {margin:.1f} dB beyond min_sqnr_db; the plan "
        f"measures {min(plan.sqnr_reference_db.values()):.1f} dB")
    return tried, plan

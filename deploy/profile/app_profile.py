"""An application's CNNs measured on this machine through ONNX Runtime: the device profile
`explore profile` writes and `platform: cpu` plans with (docs/profile.md).

Every layer is timed alone, whole and one phase (layers.py: the workspace and session state
too), then in the ladder's deployments whole and in parts of every k, run as `explore run`
runs them (ladder.py); the ladder's figures win where it measured them."""
from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from deploy.profile.ladder_records import LadderTimes
from deploy.quant.stored import weights_for
from explorer.app.model import Application
from explorer.throughput.device_profile import DeviceProfile
from explorer.throughput.layer_times import LayerTimes, from_flat
from sdf3.errors import InputError

if TYPE_CHECKING:     # imported where measured: it loads ONNX Runtime
    from deploy.profile.layers import AloneTimes

Progress = Callable[[str], None]
HOW = ("whole_ms and by_phases {phases: ms per frame}: median over frames of "
       "the layer's calls (the least over rounds) in deployments whole and in "
       "parts of every k of ladder_rows (explore run's layout and threads); "
       "region: parameters of the layer's by-parts region there; alone: the "
       "same with every neighbour whole; beside_ms: median time whole beside "
       "a layer in parts; ladder_runs: each "
       "deployment's median frame beside its layers' sum; part_ms is one "
       "interior phase timed alone (explore profile)")


@dataclass(frozen=True)
class Settings:
    """How to measure: as the flags of `explore profile` say (docs/profile.md)."""
    threads: int = 0
    repeats: int = 20
    layout: str = "blocked"
    steps: str = "regions"
    frames: int = 10
    rounds: int = 1
    primitives: bool = False


def onnxruntime_dtype(app: Application, where: str) -> str:
    """The ONNX Runtime data type of the app's precision's data ("uint8" for int8: a QDQ
    model's own int8 activations are timed as uint8, ONNX Runtime's integer kernels take
    either at the same speed)."""
    if app.precision.data_bytes not in (1, 2, 4):
        raise InputError(f"{where}: precision {app.precision.name} cannot run on ONNX Runtime "
                         "CPU here (fp32, fp16 or int8 data)")
    return {4: "float32", 2: "float16", 1: "uint8"}[app.precision.data_bytes]


def code_digest() -> str:
    """sha256 of the source of what a profile measures (the step builders, the quantization,
    the ONNX Runtime backend, the executor, the profile itself): a profile cached by other
    code (another step form, another weight storage) is not reused."""
    import hashlib
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for sub in ("steps", "quant", "ort", "runtime", "profile", "build"):
        for path in sorted((root / sub).rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def timing_scales(cnn, dtype: str):
    """For an int8 profile (`dtype` "uint8"), scales of `cnn`'s stored tensors to time its
    steps with: calibrated on generated frames as `explore deploy` does without
    --calibration (deploy/build/quantization.py), so fused activations and zero points are
    those of a real deployment; None otherwise."""
    if dtype != "uint8":
        return None
    from deploy.build.quantization import deployment_scales
    from deploy.quant.scales import ActivationScales
    return ActivationScales("uint8", deployment_scales({cnn.name: cnn}, None).by_tensor)


def measure_app(app: Application, settings: Settings, progress: Progress | None = None,
                meta: dict | None = None) -> DeviceProfile:
    """The measured profile of every CNN of `app`; `progress(line)` hears of every layer
    timed and every ladder deployment written and timed; `meta` joins the profile's meta."""
    from deploy.profile.ladder import ladder_rows, profile_ladder
    from deploy.profile.layers import profile_cnn

    say = progress or (lambda line: None)
    dtype = onnxruntime_dtype(app, str(app.path or app.name))
    models, prims, rungs, runs = {}, {}, {}, {}
    for name, cnn in app.cnns.items():
        count = len(cnn.graph)
        say(f"profiling {name}: {count} layers")
        done = iter(range(1, count + 1))
        scales = timing_scales(cnn, dtype)
        table = profile_cnn(cnn, dtype, settings.repeats, settings.threads,
                            lambda layer, t: say(f"  {name} layer {next(done)} of {count} "
                                                 f"({layer}): {t.whole_ms:.3f} ms whole"),
                            weights=weights_for(app.precision.name), scales=scales)
        say(f"  {name}: workspace and session state measured; the ladder's deployments next")
        # the times the evaluator uses: every layer where it runs, in deployments whole and
        # in parts of every k of the ladder, layout and threads as `explore run`
        runs[name] = []
        ladder = profile_ladder(cnn, app.precision.name, settings.frames, settings.threads,
                                settings.layout, None, runs[name], settings.rounds,
                                settings.steps == "regions",
                                lambda text: say(f"  {name} ladder: {text}"), scales)
        models[name] = {layer: _layer_times(t, ladder.get(layer, LadderTimes()))
                        for layer, t in table.items()}
        rungs[name] = ladder_rows(cnn)
        if settings.primitives and scales is None:
            from deploy.profile.primitives import profile_primitives
            say(f"  {name}: timing every primitive")
            prims[name] = profile_primitives(cnn, dtype, settings.repeats, settings.threads)
    return DeviceProfile(
        name=f"{platform.node()}-onnxruntime", models=models, precision=app.precision.name,
        meta={"backend": "onnxruntime", "device": platform.processor() or platform.machine(),
              "threads": settings.threads, "repeats": settings.repeats,
              "layout": settings.layout, "steps": settings.steps,
              "frames": settings.frames, "rounds": settings.rounds, "ladder_rows": rungs,
              "ladder_runs": runs, "how": HOW, **(meta or {})},
        primitives=prims)


def _layer_times(alone: AloneTimes, ladder: LadderTimes) -> LayerTimes:
    """A layer's times: whole and its bytes as the ladder's whole deployment ran it where
    it measured, else as timed alone; the contexts only the ladder measures."""
    def first(a, b):
        return a if a is not None else b
    return from_flat(first(ladder.whole_ms, alone.whole_ms), part_ms=alone.part_ms,
                     phases=alone.phases,
                     whole_ws_bytes=first(ladder.whole_ws_bytes, alone.whole_ws_bytes),
                     part_ws_bytes=alone.part_ws_bytes,
                     whole_session_bytes=first(ladder.whole_session_bytes,
                                               alone.whole_session_bytes),
                     part_session_bytes=alone.part_session_bytes, beside_ms=ladder.beside_ms,
                     beside_session_bytes=ladder.beside_session_bytes,
                     beside_ws_bytes=ladder.beside_ws_bytes, call_bytes=ladder.call_bytes,
                     by_phases=ladder.by_phases, region=ladder.region, alone=ladder.alone,
                     band_session_bytes=ladder.band_session_bytes,
                     band_ws_bytes=ladder.band_ws_bytes,
                     alone_session_bytes=ladder.alone_session_bytes,
                     alone_ws_bytes=ladder.alone_ws_bytes)

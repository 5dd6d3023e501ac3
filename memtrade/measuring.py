"""`memtrade.run`: a deployment run and measured (deploy/run/measure.py), judged against its
reference at the plan's precision (deploy/run/verdict.py; deploy/run/references.py says which),
and, for fp16, mixed and int8 plans, its deviation from the fp32 model (deploy/run/vs_fp32.py),
as a typed record.

Frames are seeded random ones, or the caller's own (`inputs`: per CNN an array [F, N, C, H, W],
or [N, C, H, W] for one frame); with the caller's frames every frame's outputs come back, in
the model's shapes, as `memtrade.Session.run` returns them, and the verdict is judged on
those frames. Every figure is measured on the run; the plan's are beside them, never instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np

from deploy.quant.frame_values import check_values
from deploy.quant.origin import ScalesOrigin
from deploy.run.verdict import Verdict
from deploy.run.vs_fp32 import VsFp32
from memtrade.feeds import per_cnn
from sdf3.errors import InputError

MAX_SEED = 2**32 - 1        # as the search's seed (explorer/app/appfile.py SEARCH_LIMITS)
MAX_FRAMES = 10**9          # beyond any measurement; a larger figure is a typing error


def check_count(flag: str, value: Any, low: int, high: int) -> int:
    """`value` as a whole number from `low` to `high`, or one line naming `flag`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise InputError(f"{flag}: expected a whole number from {low} to {high}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class Memory:
    """The process's memory around the deployment (deploy/runtime/footprint.py): the
    footprint (peak RSS - the RSS before loading), the baseline, the backend's one-time
    init, the peak, the footprint by part, and the peak of the child that optimised the
    models (None when none did)."""
    footprint_bytes: int
    baseline_rss_bytes: int
    runtime_init_bytes: int
    peak_rss_bytes: int
    breakdown: Mapping[str, int]
    load_helper_peak_rss_bytes: int | None = None


@dataclass(frozen=True)
class PlanFigures:
    """The plan's own figures, carried beside the measured ones (never measured)."""
    memory_bytes: int | None = None
    param_bytes: int | None = None
    buffer_bytes: int | None = None
    workspace_bytes: int | None = None
    session_bytes: int | None = None
    output_bytes: int | None = None
    fps: Mapping[str, float] = field(default_factory=dict)
    platform: str | None = None


@dataclass(frozen=True)
class RunResult:
    """What a run measured: per CNN fps, calls per frame, the median frame time, the
    largest difference to its reference and that reference's largest output, and the verdict;
    the arena, weights and scratch bytes; the process's memory (None where the backend's
    own runner measured); the plan's figures beside them. Per CNN: `references` what the
    verdict judged against, in words; `vs_fp32` the deviation from the fp32 model (fp16,
    mixed and int8 plans; empty for fp32 ones, whose verdict is that comparison);
    `calibration` where an int8 deployment's scales came from. `data` is the whole record
    as run.json holds it."""
    backend: str
    frames: int
    fps: Mapping[str, float]
    calls_per_frame: Mapping[str, float]
    frame_ms_median: Mapping[str, float]
    arena_bytes: int
    param_bytes: int
    scratch_bytes: int
    max_abs_diff: Mapping[str, float | None]
    max_abs_output: Mapping[str, float | None]
    memory: Memory | None
    plan: PlanFigures
    notes: tuple[str, ...]
    verdicts: Mapping[str, Verdict]
    outputs: Mapping[str, tuple] = field(default_factory=dict, repr=False)   # per CNN, per frame
    output_names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict, repr=False)
    vs_fp32: Mapping[str, VsFp32] = field(default_factory=dict)
    references: Mapping[str, str | None] = field(default_factory=dict)
    calibration: Mapping[str, ScalesOrigin] = field(default_factory=dict)

    @property
    def footprint_bytes(self) -> int | None:
        return None if self.memory is None else self.memory.footprint_bytes

    @property
    def passed(self) -> bool:
        """No CNN FAILs (n/a is no failure)."""
        return all(v.verdict != "FAIL" for v in self.verdicts.values())

    def to_dict(self) -> dict[str, Any]:
        """The result as run.json and `explore run --json` give it."""
        return {k: v for k, v in self.data.items() if k != "outputs"}


def _record(data: dict, verdicts: dict, outputs: dict, names: dict) -> RunResult:
    """The measured result as deploy/run/measure.py returns it (run.json's form), typed."""
    frozen = MappingProxyType
    memory = None
    if "footprint_bytes" in data:
        memory = Memory(data["footprint_bytes"], data["baseline_rss_bytes"],
                        data.get("runtime_init_bytes", 0), data["peak_rss_bytes"],
                        frozen(dict(data["breakdown"])), data.get("load_helper_peak_rss_bytes"))
    plan = PlanFigures(**{k: data.get(f"plan_{k}") for k in PlanFigures.__dataclass_fields__
                          if k != "fps"}, fps=frozen(dict(data.get("plan_fps") or {})))
    return RunResult(data["backend"], data["frames"], frozen(data["fps"]),
                     frozen(data["calls_per_frame"]), frozen(data.get("frame_ms_median") or {}),
                     data["arena_bytes"], data["param_bytes"], data.get("scratch_bytes", 0),
                     frozen(data.get("max_abs_diff") or {}), frozen(data.get("max_abs_output") or {}),
                     memory, plan, tuple(data.get("notes") or ()), frozen(verdicts), frozen(outputs),
                     frozen(names), frozen(data),
                     frozen({n: VsFp32.from_dict(v) for n, v in (data.get("vs_fp32") or {}).items()}),
                     frozen(dict(data.get("references") or {})),
                     frozen({n: ScalesOrigin.from_json(o, f"calibration.{n}")
                             for n, o in (data.get("calibration") or {}).items()}))


def frames_of(cnns: list[str], inputs: Any, where: str = "inputs") -> dict[str, np.ndarray]:
    """The caller's frames per CNN as [F, N, C, H, W] arrays: an array for an app of one CNN
    ([F, N, C, H, W], or [N, C, H, W] for one frame), else a mapping by CNN name."""
    inputs = per_cnn(inputs, cnns, where, "frames")
    out = {}
    for name in cnns:
        arr = np.asarray(inputs[name])
        out[name] = arr[None] if arr.ndim == 4 else arr
        if out[name].ndim != 5 or not len(out[name]):
            raise InputError(f"{where}: frames of CNN {name!r}: expected [F, N, C, H, W] or "
                             f"[N, C, H, W], got shape {list(arr.shape)}")
        check_values(out[name], f"{where}: frames of CNN {name!r}")
    return out


def run(deployment: str | Path, frames: int = 20, seed: int = 0, threads: int = 0,
        check: bool = True, inputs: Any = None, layout: str = "blocked",
        backend: str | None = None, shared_pool: bool = False,
        progress: Callable[[str], None] | None = None) -> RunResult:
    """Run the deployment in directory `deployment` and measure it: `frames` seeded random
    frames (seed `seed`), or the caller's `inputs`; ONNX Runtime with `threads` intra-op
    threads per step session (0: one per core). `check`: compare every CNN's outputs with
    its reference at the plan's precision and judge them, and (fp16, mixed, int8) with the
    fp32 model. `shared_pool`: one ORT thread pool for the whole
    process (only for a process that does nothing else, as `explore run`)."""
    from deploy.run import verdict
    from deploy.run.measure import CHECKED, frames_for, measure
    from deploy.runtime import manifest as mf
    from memtrade.feeds import ports

    frames = check_count("--frames", frames, 1, MAX_FRAMES)
    seed = check_count("--seed", seed, 0, MAX_SEED)
    path = Path(getattr(deployment, "path", deployment))
    manifest = mf.load(path)
    cnns = list(manifest.cnns)
    given = None
    if inputs is not None:
        shaped = {n: ports(path, n, manifest.cnns[n]) for n in cnns}
        given = {n: [shaped[n].check(f) for f in stack]
                 for n, stack in frames_of(cnns, inputs, "--input").items()}
    data = measure(path, frames=frames, seed=seed, backend=backend, threads=threads, check=check,
                   shared_pool=shared_pool, layout=layout, progress=progress, inputs=given)
    verdicts: dict[str, Verdict] = {}
    if check and data.get("max_abs_output"):
        compared = given if given is not None else {
            n: [s[f] for f in range(min(CHECKED, len(s)))]
            for n, s in frames_for(manifest, max(frames, len(cnns)), seed).items()}
        verdicts = verdict.for_run(path, data["max_abs_diff"], data["max_abs_output"], compared, threads,
                                   rms=data.get("rms_diff"))
        data["verdict"] = {n: {**v.to_dict(), **({"reference": data["references"][n]}
                                                  if (data.get("references") or {}).get(n) else {})}
                           for n, v in verdicts.items()}
    outputs, names = {}, {}
    if given is not None:
        outputs = {n: tuple(shaped[n].shaped(outs) for outs in data["outputs"][n]) for n in cnns}
        names = {n: tuple(p.name for p in shaped[n].outputs) for n in cnns}
    return _record(data, verdicts, outputs, names)

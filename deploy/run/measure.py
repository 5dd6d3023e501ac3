"""Run a deployment and measure it: fps per CNN, arena and parameter bytes, calls made,
the process's footprint (deploy/runtime/footprint.py), the largest difference to the reference
at the plan's precision (the unmodified model for fp32 plans, deploy/run/references.py) and,
for fp16, mixed and int8 plans, the deviation from the fp32 model (deploy/run/vs_fp32.py).
Everything here is measured on the run; the plan's figures are reported beside the
measured ones, never instead of them. The reference check runs after the footprint is
read, so the reference's session does not inflate it."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from deploy.backends import registry
from deploy.runtime import manifest as mf
from deploy.checks import files, manifest_check
from deploy.checks import reference
from deploy.run import vs_fp32
from deploy.run.references import judged_against
from deploy.runtime.executor import Executor
from deploy.runtime.footprint import Footprint, peak_rss_bytes  # noqa: F401  (peak_rss_bytes: callers)
from sdf3.errors import InputError


POOL = 16       # distinct frames per CNN; a longer run cycles through them
CHECKED = 16    # leading frames per CNN whose outputs are kept and compared


class Frames:
    """A CNN's frames for one run: seeded standard normals, made when first used and kept
    for at most POOL distinct frames (frame f is the pool's f mod POOL), so `--frames
    100000` holds 16 frames, not 100,000. Indexable and sized like a list. Drawn in float32
    directly: float64 draws, once freed, stayed resident heap that loading then reused
    unseen (YOLOv2-16's 608x608 frames: 7 MiB of the footprint missing without `explore
    run`'s check, found with it)."""

    def __init__(self, shape: list[int], count: int, seed: int, index: int):
        self.shape, self.count = list(shape), int(count)
        self._rng = np.random.default_rng([seed, index])
        self._pool: list[np.ndarray] = []

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, f: int) -> np.ndarray:
        if not 0 <= f < self.count:
            raise IndexError(f)
        k = f % POOL
        while len(self._pool) <= k:
            self._pool.append(self._rng.standard_normal(self.shape, dtype=np.float32))
        return self._pool[k]

    def __iter__(self):
        return (self[f] for f in range(self.count))

    def fill(self) -> "Frames":
        """Make the pool now (before timing starts)."""
        if self.count:
            self[min(self.count, POOL) - 1]
        return self


def frames_for(manifest: mf.Manifest, count: int, seed: int) -> dict[str, Frames]:
    """Frame i goes to CNN i mod n (manifest order); values are seeded standard normals."""
    names = list(manifest.cnns)
    return {name: Frames(list(manifest.cnns[name].inputs[0].shape),
                         count // len(names) + (1 if i < count % len(names) else 0), seed, i).fill()
            for i, name in enumerate(names)}


def measure(deploy_dir: str | Path, frames: int = 20, seed: int = 0, backend: str | None = None,
            threads: int = 0, check: bool = True, warmup: int = 3,
            shared_pool: bool = False, layout: str = "nchwc",
            progress: Callable[[str], None] | None = None,
            inputs: Mapping[str, Sequence[np.ndarray]] | None = None) -> dict[str, Any]:
    """`inputs`: the frames to run per CNN (each a sequence of NCHW float32 frames; every
    CNN of the deployment named), instead of `frames` seeded random ones; their outputs,
    every frame's, are then returned under "outputs" (per CNN, per frame, per output, NCHW),
    and the check compares every frame. `progress(line)` hears what the run is doing
    (loading, each CNN's frames, the check), so a long run is never silent. shared_pool: one ORT thread pool for the whole process (deploy/ort/process.py); only for
    processes that do nothing else, like `explore run`. layout: ORT kernels per step
    ("auto" times NCHWc against plain per step model and keeps the faster). A step model
    that fails to load or run is one line ending with whose fault it is (deploy/checks/files.py)."""
    from deploy.ort.optimize import ModelRefused
    from deploy.runtime.executor import StepFailed
    try:
        return _measure(deploy_dir, frames, seed, backend, threads, check, warmup, shared_pool,
                        layout, progress or (lambda line: None), inputs)
    except (StepFailed, ModelRefused) as err:
        words = files.blame(mf.load(deploy_dir), deploy_dir)
        raise type(err)(f"{err} ({words})") from None


def _measure(deploy_dir: str | Path, frames: int, seed: int, backend: str | None, threads: int,
             check: bool, warmup: int, shared_pool: bool, layout: str,
             progress: Callable[[str], None],
             inputs: Mapping[str, Sequence[np.ndarray]] | None = None) -> dict[str, Any]:
    manifest = mf.load(deploy_dir)
    manifest_check.check(manifest, deploy_dir)     # before anything is allocated or run
    backend_name = backend or manifest.backend
    chosen = registry.backend(backend_name)
    if chosen.capabilities.own_runner:      # e.g. TensorRT's standalone runner
        if inputs is not None:
            raise InputError(f"--input: the {backend_name} deployment runs in its own runner, "
                             f"on its own frames")
        measured = chosen.measure(deploy_dir, frames, seed, warmup, check)
        if manifest.dtype != "float32":
            gone = vs_fp32.VsFp32(reason=f"the {backend_name} deployment runs in its own runner, "
                                         f"which returns no outputs to compare")
            measured["vs_fp32"] = {name: gone.to_dict() for name in manifest.cnns}
        return measured
    routed = (frames_for(manifest, max(frames, len(manifest.cnns)), seed) if inputs is None
              else dict(inputs))
    keep = CHECKED if inputs is None else max(len(s) for s in routed.values())
    # its imports belong before the baseline; its process initialisation is counted apart
    init = chosen.process_init(threads, shared_pool, manifest.plan_workspace_bytes or 0)
    kept: dict[str, list] = {}    # the check's copies of outputs: resident before the
    for name, stream in routed.items() if check else ():   # baseline, not in the footprint
        kept[name] = [[np.ones(o.shape, np.float32) for o in manifest.cnns[name].outputs]
                      for _ in range(min(keep, len(stream)))]
    fp = Footprint()
    fp.start(init)
    progress(f"loading {len(manifest.models)} step models")
    be = chosen.runtime(manifest.dtype, threads, shared_pool, layout)
    ex = Executor(manifest, deploy_dir, be)
    arena_bytes = int(ex.arena.nbytes if manifest.arena_bytes else 0)
    scratch = scratch_bytes(ex)
    fp.counted = {"weights_bytes": be.param_bytes(), "arena_bytes": arena_bytes,
                  "scratch_bytes": scratch}
    fp.loaded()
    fps, calls, outputs = {}, {}, {}
    frame_ms: dict[str, float] = {}
    frame_cpu_ms: dict[str, float] = {}
    timings: dict[str, list] = {}
    for name, stream in routed.items():
        progress(f"running {name}: {warmup} warm-up and {len(stream)} timed frames")
        # warm-up: ORT sessions plan and allocate over their first runs (measured: the
        # first three frames of ResNet-50 run 20x slower than the rest)
        ex.run_stream(name, [stream[f % len(stream)] for f in range(warmup)], keep_outputs=False)
        run = ex.cnns[name]
        run.calls = 0
        per_frame: list = []
        start = time.perf_counter()
        outputs[name] = ex.run_stream(name, stream, keep_outputs=keep if check or inputs else False,
                                      timings=per_frame, into=kept.get(name))
        elapsed = time.perf_counter() - start
        fps[name] = len(stream) / elapsed
        calls[name] = run.calls / len(stream)
        timings[name] = per_frame
    fp.ran()
    # statistics after the peak is read: numpy's median and the modules it loads on first
    # use held 1.6 MiB (code pages, heap), which is the measurement's memory, not the
    # deployment's
    for name, per_frame in timings.items():
        if per_frame:      # sequential CNNs: medians per frame (wall, this thread's CPU)
            frame_ms[name] = float(np.median([w for w, _ in per_frame])) * 1e3
            frame_cpu_ms[name] = float(np.median([c for _, c in per_frame])) * 1e3
    diff: dict[str, float | None] = {}
    magnitude: dict[str, float | None] = {}   # largest |reference output|: the diff's scale
    rms: dict[str, float] = {}                 # root mean square difference (per-layer verdicts)
    if check:
        progress("comparing the outputs with the reference's")
        for name, stream in routed.items():
            ref_path = manifest.cnns[name].reference
            if ref_path is None:
                diff[name] = magnitude[name] = None
                continue
            # the reference at the plan's precision: the unmodified model rounded as the
            # deployment rounds, or the int8 reference (deploy/run/verdict.py)
            sess = reference.session(Path(deploy_dir) / ref_path, threads, manifest.dtype,
                                     registry.backend(manifest.backend)
                                     .stored_weights(manifest.precision))
            worst, size, power, count = 0.0, 0.0, 0.0, 0
            for frame, got in zip(stream, outputs[name]):
                want = reference.run(sess, frame)
                for g, w in zip(got, want):
                    d = np.abs(g - w.reshape(g.shape), dtype=np.float64)
                    worst = max(worst, float(np.max(d)))
                    power, count = power + float(np.sum(d * d)), count + d.size
                    size = max(size, float(np.max(np.abs(w))))
            diff[name], magnitude[name] = worst, size
            rms[name] = (power / count) ** 0.5 if count else 0.0
    deviation: dict[str, vs_fp32.VsFp32] = {}     # reduced precision: the cost of it
    if manifest.dtype != "float32":
        unchecked = vs_fp32.VsFp32(reason="not compared (--no-check keeps no outputs)")
        for name, stream in routed.items():
            deviation[name] = (vs_fp32.compare(deploy_dir, manifest, name, stream, outputs[name], threads)
                               if check else unchecked)
    helper = getattr(be, "helper_peak_rss_bytes", 0)     # a child process that optimised the models
    result = {"fps": fps, "arena_bytes": arena_bytes,
              "param_bytes": be.param_bytes(), "max_abs_diff": diff, "max_abs_output": magnitude,
              **({"rms_diff": rms} if rms and manifest.per_layer else {}),
              "calls_per_frame": {k: int(v) if float(v).is_integer() else v for k, v in calls.items()},
              "scratch_bytes": scratch,
              "frame_ms_median": frame_ms, "frame_cpu_ms_median": frame_cpu_ms,
              "backend": backend_name, "frames": sum(len(s) for s in routed.values()),
              **fp.report(), **plan_figures(manifest),
              **({"outputs": outputs} if inputs is not None else {}),
              **({"vs_fp32": {n: v.to_dict() for n, v in deviation.items()}} if deviation else {}),
              "references": {n: judged_against(manifest, n, deploy_dir) for n in manifest.cnns},
              **scales_origins(manifest),
              **({"notes": be.notes()} if hasattr(be, "notes") else {}),
              **({"load_helper_peak_rss_bytes": helper} if helper else {})}
    return result


def scales_origins(manifest: mf.Manifest) -> dict[str, Any]:
    """An int8 deployment's "calibration": per CNN where its scales came from
    (deploy/quant/origin.py), as the manifest keeps it."""
    quant = manifest.quantization
    if quant is None or not quant.origins:
        return {}
    return {"calibration": {n: o.to_json() for n, o in quant.origins.items()}}


def plan_figures(manifest: mf.Manifest) -> dict[str, Any]:
    """The plan's own figures, reported beside the measured ones (never as measured)."""
    return {key: getattr(manifest, key) for key in
            ("plan_param_bytes", "plan_buffer_bytes", "plan_workspace_bytes",
             "plan_session_bytes", "plan_output_bytes", "plan_memory_bytes", "plan_fps",
             "plan_platform")}


def scratch_bytes(ex: Executor) -> int:
    """Memory the executor holds outside the arena: slot index vectors and output arrays."""
    total = sum(c.nbytes for c in ex.consts)
    for run in ex.cnns.values():      # a sequential CNN's two parities share its arrays
        total += sum({id(a): a.nbytes for parity in run.outputs for a in parity}.values())
    return int(total)

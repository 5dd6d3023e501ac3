"""Candidate steps timed where they run: inside a deployment's frame (TASO's per-primitive
T_i and Trans_(i,j), Wen et al. 2020 Sec. 4.3, measured as `explore run` runs a plan).

Why: a step called alone, even after a flush of the core's L2, finds its weights in the
32 MiB L3; in a frame the other steps' weights and tensors have evicted them. Measured on
the ResNet-style net (docs/primitives.md): layer4's 3x3 convs took 0.15 ms alone and
0.35 ms in the frame, so profiles taken alone predicted 1.39x too fast a frame.

How: the CNN is deployed whole with every layer's default primitive (ORT's plain Conv) and
loaded by deploy/runtime/executor.py with the backend `explore run` uses (ONNX Runtime's one shared
thread pool and arena, I/O binding on the arena's views), in a child process of its own.
Each candidate (a layer's step model built with one primitive, deploy/profile/primitives.py)
is bound to the views of that layer's step; before each timed call the frame's other steps
run in frame order (the steps after the layer, then those before it), so the candidate meets
the cache state and neighbours' data it meets in a deployment. The figure is the median of
`repeats` calls after 3 warm-ups, the call as the executor makes it (per-call overhead
included). An NCHWc candidate is also timed with one port at a time plain (ONNX Runtime's
reorder inside the step, as a deployment runs it), in turn with the all-blocked form in
every repeat: a layout transition is the median of the paired differences.

Usage (internal): python -m deploy.profile.primitive_timing DEPLOY_DIR JOBS.json OUT.json THREADS REPEATS
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from deploy.runtime.child import child_env

WARMUP = 3


@dataclass(frozen=True)
class Variant:
    """The ports of an NCHWc candidate read/written blocked and those left plain (ONNX
    Runtime's reorder inside the step)."""
    blocked: tuple[str, ...] = ()
    plain: tuple[str, ...] = ()


@dataclass(frozen=True)
class TimingJob:
    """A candidate to time for `layer`: its step model (None: the deployment's own step),
    its layout (nchw or nchwc), its variants (timed in turn in every repeat) and whether to
    `check` that it computes the step."""
    layer: str
    model: str | None
    layout: str = "nchw"
    variants: tuple[Variant, ...] = ()
    check: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TimingJob:
        fields = dict(data)
        variants = tuple(Variant(**v) for v in fields.pop("variants"))
        return cls(**fields, variants=variants)


@dataclass(frozen=True)
class Timing:
    """A job timed: the median ms per variant, the median over repeats of each variant's
    time less variant 0's in the same repeat, and with `check` the largest difference of
    each variant's outputs to the step's (`_check`)."""
    ms: tuple[float, ...]
    diff: tuple[float, ...]
    max_abs_diff: tuple[float, ...] | None = None


def _form_transform(backend, key: str, work: str, blocked: list[str], plain: list[str]):
    """The blocked form of step model `key` with `blocked` ports read/written blocked and
    `plain` ones through ONNX Runtime's reorders (deploy/ort/primitive_forms.py)."""
    from deploy.ort.primitive_forms import blocked_form, stripped_step
    ins = [p for p in blocked + plain if p.startswith("in")]
    outs = [p for p in blocked + plain if not p.startswith("in")]
    found = blocked_form(key, work, backend.options(), ins, outs)
    if found is None:
        raise RuntimeError(f"{key}: no blocked form on this machine")
    form = found[1]
    ports, everything = set(blocked), set(blocked) | set(plain)
    return lambda m: stripped_step(m, form, ports, everything)


def _variant_key(job: TimingJob, k: int) -> Path:
    """Variant k of `job`'s model: a link of its own to the model file, so the backend keeps
    the variants' forms and sessions apart."""
    src = Path(str(job.model))
    key = src.with_name(f"{src.stem}.v{k}{src.suffix}")
    if not key.exists():
        os.link(src, key)
    return key


def _bind_variant(backend, ex, view_key, job: TimingJob, k: int, work: str):
    """A call of variant k of `job` bound to the step's views."""
    key = _variant_key(job, k)
    variant = job.variants[k]
    if job.layout == "nchwc":
        transform = _form_transform(backend, str(key), work, list(variant.blocked),
                                    list(variant.plain))
        backend.fix_form(key, "nchwc", frozenset(variant.blocked), transform)
    else:
        backend.fix_form(key, "nchw")
    ins, outs = ex.views[view_key]
    return str(key), backend.bind(backend.load(key), ins, outs)


def _check(calls: list, k: int, outs: dict, targets: list) -> list[float]:
    """Per target, the largest difference of what it writes into step k's output views to
    what step k itself writes there, on the same frame (a candidate bound to the step's
    views computes the step)."""
    for call in calls[:k + 1]:
        call()
    want = {name: view.copy() for name, view in outs.items()}
    diffs = []
    for target in targets:
        for view in outs.values():
            view[...] = np.nan
        for call in calls[:k]:
            call()
        target()
        diffs.append(max(float(np.max(np.abs(outs[n] - want[n]))) for n in outs))
    return diffs


def time_jobs(deploy_dir: Path, jobs: list[TimingJob], threads: int, repeats: int) -> list[Timing]:
    """Every job's `Timing`, every call timed in the frame of the deployment in
    `deploy_dir`. Variants are timed in turn within each repeat, so a slow spell of the
    machine shifts both sides of a difference alike."""
    from deploy.ort.backend import OrtBackend
    from deploy.ort.process import init_runtime
    from deploy.runtime import executor
    from deploy.runtime import manifest as mf

    manifest = mf.load(deploy_dir)
    init_runtime(threads, True)
    backend = OrtBackend(manifest.dtype, threads, True, "blocked")
    ex = executor.Executor(manifest, deploy_dir, backend)
    (cnn, info), = manifest.cnns.items()
    executor.set_frame(np.random.default_rng(0).standard_normal(info.inputs[0].shape).astype(np.float32))
    (part,), = [[p for p in manifest.partitions if p.cnn == cnn]]
    calls = ex.cnns[cnn].partitions[0].calls[0]
    index = {s.layer: i for i, s in enumerate(part.steps)}
    for call in calls:
        call()
    # every candidate's ONNX Runtime optimisation in one child process, not one child each
    backend.prefetch([(str(_variant_key(job, v)), "nchwc" if job.layout == "nchwc" else "nchw")
                      for job in jobs if job.model is not None for v in range(len(job.variants))])
    out = []
    with tempfile.TemporaryDirectory() as work:
        for job in jobs:
            k = index[job.layer]
            if job.model is None:
                keys, targets = [], [calls[k]]
            else:
                bound = [_bind_variant(backend, ex, (part.name, k, 0), job, v, work)
                         for v in range(len(job.variants))]
                keys, targets = [b[0] for b in bound], [b[1] for b in bound]
            others = calls[k + 1:] + calls[:k]
            times = [[] for _ in targets]
            for r in range(WARMUP + repeats):
                for target, series in zip(targets, times):
                    for call in others:
                        call()
                    start = time.perf_counter()
                    target()
                    if r >= WARMUP:
                        series.append(time.perf_counter() - start)
            t = np.asarray(times) * 1e3
            checked = _check(calls, k, ex.views[(part.name, k, 0)][1], targets) if job.check \
                else None
            out.append(Timing(tuple(float(v) for v in np.median(t, axis=1)),
                              tuple(float(v) for v in np.median(t - t[0], axis=1)),
                              None if checked is None else tuple(checked)))
            for key in keys:                   # one candidate's sessions at a time
                for layout in ("nchw", "nchwc", "blocked"):
                    backend.drop_session(f"{layout}:{key}")
    return out


def measure(deploy_dir: Path, jobs: list[TimingJob], threads: int, repeats: int) -> list[Timing]:
    """time_jobs in a process of its own, as `explore run` runs: ONNX Runtime's one
    process-wide thread pool, which a process cannot share with per-session pools."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "jobs.json", Path(tmp) / "out.json"
        src.write_text(json.dumps([j.to_json() for j in jobs]))
        env = child_env()
        done = subprocess.run([sys.executable, "-m", "deploy.profile.primitive_timing", str(deploy_dir),
                               str(src), str(dst), str(threads), str(repeats)],
                              capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"timing in {deploy_dir} failed: {done.stderr.strip()[-2000:]}")
        return [Timing(tuple(t.pop("ms")), tuple(t.pop("diff")), **t)
                for t in json.loads(dst.read_text())]


def main(argv: list[str]) -> int:
    deploy_dir, jobs, dst, threads, repeats = argv
    times = time_jobs(Path(deploy_dir), [TimingJob.from_json(j) for j in json.loads(Path(jobs).read_text())],
                      int(threads), int(repeats))
    Path(dst).write_text(json.dumps([asdict(t) for t in times]))
    return 0


if __name__ == "__main__":
    from sdf3.parent_death import die_with_parent
    die_with_parent()          # ends with the explore that started it (child_env)
    sys.exit(main(sys.argv[1:]))

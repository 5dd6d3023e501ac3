"""`explore run`'s verdict: does each CNN's deployment compute what the unmodified model
computes, at the plan's own precision?

The deployed outputs are compared (deploy/run/measure.py) with the unmodified model run at the
plan's precision (deploy/checks/reference.py: an fp16 plan against the network converted to fp16).
A CNN passes when

    max |deployed - reference|  <=  max(RTOL[dtype] * max |reference|,  NOISE * rounding)

where `rounding` is how far the fp16 reference itself lies from the fp32 one on the same
frames (0 for fp32 plans): two correct fp16 computations of one network differ by about that
much, since they round at different places (the deployment rounds at layer boundaries only,
with BatchNorm folded). RTOL for fp32 is 2e-4: the deployments of the zoo's networks give at
most 3.2e-5 (ResNet-50), while the wrong outputs of
mis-handled models (tests/test_valid_models.py, before each was fixed) were 2.5e-4 to 1
relative.

The tolerance follows the precision the reference computes in: the lower of the plan's and
the source model's own, fp16 when the model is stored in fp16 (fp16 outputs, or mostly fp16
weights behind fp32 input/output Casts: reference.stored_dtype). ONNX Runtime then runs the
reference in fp16, while an fp32 plan computes the same network in fp32.

Exit status EXIT_MISMATCH (4) when any CNN fails (docs/run.md).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from deploy.checks import reference

RTOL = {"float32": 2e-4, "float16": 1e-2}
NOISE = 2.0
EXIT_MISMATCH = 4


def rounding(deploy_dir: str | Path, manifest, frames: dict[str, list[np.ndarray]],
             threads: int = 0) -> dict[str, float | None]:
    """Per CNN, max |fp16 reference - fp32 reference| over its frames (0.0 for fp32 plans,
    None without a reference model)."""
    out: dict[str, float | None] = {}
    for name, stream in frames.items():
        ref = manifest.cnns[name].reference
        if ref is None:
            out[name] = None
            continue
        if manifest.dtype == "float32":
            out[name] = 0.0
            continue
        exact = reference.session(Path(deploy_dir) / ref, threads)
        half = reference.session(Path(deploy_dir) / ref, threads, manifest.dtype)
        worst = 0.0
        for frame in stream:
            for a, b in zip(reference.run(exact, frame), reference.run(half, frame)):
                worst = max(worst, float(np.max(np.abs(a - b))))
        out[name] = worst
    return out


def judge(result: dict[str, Any], dtype: str, noise: dict[str, float | None],
          stored: dict[str, str] | None = None) -> dict[str, dict]:
    """The verdict per CNN from a measured result (keys of measure()): PASS, FAIL, or
    "n/a" when there is no reference to compare with. `stored`: per CNN the element type
    its source model computes in (reference.stored_dtype); fp16 there means an fp16 yardstick."""
    verdicts = {}
    for name in result["fps"]:
        computes = "float16" if "float16" in (dtype, (stored or {}).get(name)) else dtype
        diff = result["max_abs_diff"].get(name)
        size = result["max_abs_output"].get(name)
        if diff is None or size is None:
            verdicts[name] = {"verdict": "n/a", "reason": "no reference model or --no-check"}
            continue
        tol = max(RTOL[computes] * size, NOISE * (noise.get(name) or 0.0))
        verdicts[name] = {
            "verdict": "PASS" if diff <= tol and np.isfinite(diff) else "FAIL",
            "max_abs_diff": diff, "max_abs_output": size,
            "relative_diff": diff / size if size else (0.0 if diff == 0 else float("inf")),
            "tolerance": tol, "reference_dtype": computes, "rounding": noise.get(name)}
        if computes != dtype:
            verdicts[name]["stored_dtype"] = computes
    return verdicts


def failed(verdicts: dict[str, dict]) -> bool:
    return any(v["verdict"] == "FAIL" for v in verdicts.values())


def for_run(deploy_dir: str | Path, result: dict[str, Any], frames: int, seed: int,
            threads: int = 0) -> dict[str, dict]:
    """The verdicts of `explore run` for a result measured with these frames and seed."""
    from deploy.runtime import manifest as mf
    from deploy.run.measure import frames_for
    manifest = mf.load(deploy_dir)
    noise: dict[str, float | None] = {name: 0.0 for name in manifest.cnns}
    if manifest.dtype != "float32":
        # the rounding scale from the first frames of each CNN (the ones measured first)
        count = min(max(frames, len(manifest.cnns)), 4 * len(manifest.cnns))
        noise = rounding(deploy_dir, manifest, frames_for(manifest, count, seed), threads)
    stored = {name: reference.stored_dtype(Path(deploy_dir) / info.reference)
              for name, info in manifest.cnns.items() if info.reference}
    return judge(result, manifest.dtype, noise, stored)

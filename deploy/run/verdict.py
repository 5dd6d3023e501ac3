"""`explore run`'s verdict: does each CNN's deployment compute what the unmodified model
computes, at the plan's own precision?

The deployed outputs are compared (deploy/run/measure.py) with the unmodified model run at the
plan's precision (deploy/checks/reference.py). For an fp32 plan of an fp32 model a CNN passes when

    max |deployed - reference|  <=  max(RTOL * max |reference|,  NOISE * spread),   RTOL = 2e-4

(the deployments of the zoo's networks give at most 3.2e-5 relative, ResNet-50; wrong outputs
2.5e-4 to 1 relative). `spread` is how far the reference lies from the same network computed
with its sums in another order: the model run again with ONNX Runtime's graph optimizations
off (`reference.session(..., plain=True)`: every Conv through im2col and GEMM in NCHW,
BatchNorm and activations as nodes of their own, where the reference runs fused NCHWc
kernels), on the same frames. Two correct fp32 computations differ by their rounding, and
that is not always relative to the output: ONNX Runtime's Sigmoid is 0.5 + x P(x^2)/Q(x^2)
(MLAS's rational approximation), so its result carries an absolute error of up to 2.8 x 2^-24
(1.7e-7) at any size and is not monotone (inputs one fp32 unit apart give outputs up to 2
units of 2^-24 apart, in either direction; benchmarks/sigmoid_resolution.py). A Sigmoid head whose outputs are all near 0 (the PP-OCRv4 text
detector's probability map of a random frame, outputs up to 1.3e-4 to 1e-2) then differs by
whole units of 2^-24 on logits that agree to their last bits: 1.79e-7 or 2.09e-7 (3 or 3.5
units), above 2e-4 of the outputs on 9 of seeds 0-19, and the plain-kernel reference lies as
far from the reference (benchmarks/results/verdict_seeds.md: with this tolerance 20 of 20
seeds PASS, the worst at 0.194 of it). Each of two correct computations
lies about `spread` from the other, the deployment at most about twice that from the
reference; NOISE 6 leaves a factor of 3, as at fp16. A wrong weight, row or step moves the
outputs by the activations it touches, far beyond either term (tests/deploy/run/
test_verdict_near_zero.py).

For an fp16 (or mixed) plan of an fp32 model the reference rounds where the deployment
rounds (deploy/checks/rounding.py: fp32 arithmetic, every stored tensor rounded to fp16), and

    max |deployed - reference|  <=  max(ULPS * ulp16(max |reference|),  NOISE * spread)

`ulp16(x)` is the spacing of fp16 numbers at x, ULPS 4; `spread` is how far that rounded
reference lies from the fp32 network on the same frames (both with the weights as the
deployment holds them, docs/precision.md): the fp16 rounding of every stored tensor,
carried through the layers after it. Both computations round the same tensors
but from fp32 values that differ in their last bits (operation order, BatchNorm folded or
not, region rows handed on unrounded), so some elements round the other way by one fp16
unit, and each such unit is carried through the rest of the network like the rounding
itself: two correct computations differ by about what each lies from the exact one (on
MobileNetV2, 20-60 fp16 units at the output, as much as the rounding itself), at most twice
`spread` when both lie as far as the reference does. NOISE 6 leaves a factor of 3 on that
(benchmarks/verdict_seeds.py: the README's MobileNetV2 at seeds 0-99, docs/deploy.md). A wrong
row, weight or ring slot changes outputs by the size of the activations it touches, far
beyond a rounding unit carried along.

A model stored in fp16 (fp16 outputs, or mostly fp16 weights behind fp32 input/output Casts:
reference.stored_dtype) has ONNX Runtime compute its reference in fp16, while the deployment
computes the same network in fp32 (fp32 plan) or rounding only at layer boundaries (fp16
plan); such a CNN passes when the difference is within max(RTOL16 * max |reference|,
2 * rounding), RTOL16 = 1e-2, `rounding` the fp16 reference's distance from the fp32 one.

For an int8 plan the reference is the whole network quantized with the deployment's own
scales and weights (deploy/checks/quantized.py), one ONNX Runtime session that fuses each
DequantizeLinear -> op -> QuantizeLinear group into its QLinear kernel. The deployment's output
is the last layer's stored uint8 tensor dequantized and the reference's passes the same
QuantizeLinear -> DequantizeLinear, so the two differ by whole steps of that tensor's scale:

    max |deployed - reference|  <=  INT8_UNITS * scale(output),     INT8_UNITS = 6

What differs: a step that computes in fp32 between DequantizeLinear and QuantizeLinear (parts
of rows, masks) instead of a fused kernel (integer sums, requantized once) rounds some elements
the other way by one unit, and each such unit is carried through the layers after it.
Measured as the reference against the same model with ONNX Runtime's QDQ fusion off
(`session.disable_quant_qdq`: every layer in fp32), 20 seeds, scales from 16 generated frames
(benchmarks/int8_tolerance.py): at most 1 unit on the small graphs (tests/conftest.py's tiny
CNN; conv, depthwise stride 2, residual Add, Concat; tests/onnx_cases.py's MobileNet block) and
3 units on its region block (8 layers): INT8_UNITS is twice the worst. Damage to their middle
tensor, least over the seeds: written at twice its scale 18-39 units, two rows swapped 16-40
(0 on the tiny CNN, whose global pooling sums the rows in any order).
Deep networks carry a flipped unit much further: on the zoo's MobileNetV2 (67 layers) the same
comparison reaches 111 units (its output spans 255), MobileNet-v1 0.25 71, ResNet-small 13,
VGG-small 9, while a tensor at twice its scale moves MobileNetV2's output by 46-70 units and
two swapped rows by 12-38, and one element in 100,000 of its first layer moved by one unit
moves it by 76. No tolerance on the output tells those apart, so an int8 deployment of a deep
network PASSes only where its steps compute what the reference does, with the same integer
kernels: a QLinearConv on a band of rows (its halo rows read, not padded) gives each element
bit for bit what it gives on the whole map (tests/deploy/checks/test_quantized.py), and the
difference is then 0.

A plan with a precision per layer (docs/precision.md "Per layer") is judged against its
per-layer reference (deploy/checks/layer_reference.py) on the root mean square of the
difference over every output element of the frames compared:

    rms(deployed - reference)  <=  max(floor, NOISE_RMS * rms(plain - reference)),   NOISE_RMS = 2

`floor` the one-precision tolerance above at the type the CNN's output is stored in (int8: 6
steps of its scale; fp16: 4 units; fp32: 2e-4 relative), `plain` the per-layer reference run
with ONNX Runtime's graph optimizations off (its QDQ groups in fp32 instead of integer
kernels, its sums in another order). Not the largest difference: in a deep network mixing
precisions a last-bit difference of an fp32 sum rounds an fp16 or int8 tensor the other way,
and each such flip is carried on, so two correct computations differ on a few elements by
most of the output's range (PP-OCRv4's detector at 320 px, 151 fp16 and 130 int8 layers: the
plain-kernel reference lies up to 0.59-0.82 from the reference on about 1 % of the text map's
elements, the deployment 0.62-0.88), while the rms is a stable figure: the deployment's
0.82-1.36 times the plain kernels' over 6 sets of 4 rendered text frames, so NOISE_RMS leaves
a factor of 1.47 on the worst; two conv step models of equal ports swapped measure 2.9 and
23 times it (benchmarks/results/per_layer_verdict.md).

Exit status EXIT_MISMATCH (4) when any CNN fails (docs/run.md).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from deploy.checks import reference
from deploy.quant.scales import ActivationScales, key
from deploy.runtime.manifest_records import QUANT_DTYPES
from deploy.backends import registry

RTOL = {"float32": 2e-4, "float16": 1e-2}
ULPS = 4           # fp16 units at the output's magnitude: the floor of the rounded reference's tolerance
NOISE = 6.0        # times the reference's spread, fp32 and fp16 (module docstring)
NOISE_STORED = 2.0   # times the fp16-stored model's own rounding
NOISE_RMS = 2.0      # times the per-layer reference's own rms spread (module docstring)
INT8_UNITS = 6       # steps of the output tensor's scale: the int8 tolerance (module docstring)
EXIT_MISMATCH = 4


def spread(exact, rounded, frames) -> float:
    """max |rounded - exact| over `frames` of two reference sessions (reference.session at
    float32 and at the plan's precision)."""
    worst = 0.0
    for frame in frames:
        for a, b in zip(reference.run(exact, frame), reference.run(rounded, frame)):
            worst = max(worst, float(np.max(np.abs(a - b))))
    return worst


def rounding(deploy_dir: str | Path, manifest, frames: dict[str, list[np.ndarray]],
             threads: int = 0) -> dict[str, float | None]:
    """Per CNN, `spread` of its reference over its frames: at fp16 the reference rounded at
    the plan's precision against the fp32 one, at fp32 the plain-kernel reference against
    the reference (module docstring); 0.0 for int8 plans and for a model stored in fp16
    under an fp32 plan, None without a reference model."""
    out: dict[str, float | None] = {}
    for name, stream in frames.items():
        ref = manifest.cnns[name].reference
        if ref is None:
            out[name] = None
            continue
        if manifest.per_layer:      # the reference rounds per layer: against its plain kernels
            path = Path(deploy_dir) / ref
            out[name] = rms_spread(reference.session(path, threads),
                                   reference.session(path, threads, plain=True), stream)
            continue
        if manifest.dtype in ("uint8", "int8"):     # int8: in steps of the scale
            out[name] = 0.0
            continue
        if manifest.dtype == "float32":
            path = Path(deploy_dir) / ref
            if reference.stored_dtype(path) != "float32":   # judged by its fp16 yardstick
                out[name] = 0.0
                continue
            out[name] = spread(reference.session(path, threads),
                               reference.session(path, threads, plain=True), stream)
            continue
        # both with the weights as held: the spread is that of the data's rounding alone
        weights = registry.backend(manifest.backend).stored_weights(manifest.precision)
        exact = reference.session(Path(deploy_dir) / ref, threads, weights=weights)
        half = reference.session(Path(deploy_dir) / ref, threads, manifest.dtype, weights)
        out[name] = spread(exact, half, stream)
    return out


def rms_spread(exact, other, frames) -> float:
    """The root mean square of `other` - `exact` over every output element of `frames`."""
    power, count = 0.0, 0
    for frame in frames:
        for a, b in zip(reference.run(exact, frame), reference.run(other, frame)):
            d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
            power, count = power + float(np.sum(d * d)), count + d.size
    return (power / count) ** 0.5 if count else 0.0


def ulp16(x: float) -> float:
    """The spacing of fp16 numbers at magnitude x (fp16's smallest spacing below its normals)."""
    return float(np.spacing(np.float16(min(abs(x), 65504.0))))


def int8_step(scales: ActivationScales, output: str | list[str]) -> float:
    """The scale of the output tensor(s) of an int8 CNN ("cnn/layer" keys of `scales`; of
    several outputs, the largest)."""
    keys = [output] if isinstance(output, str) else list(output)
    return max(scales.by_tensor[k].scale for k in keys)


def tolerance(dtype: str, stored: str | None, size: float, noise: float | None,
              step: float | None = None) -> float:
    """The largest max |deployed - reference| that passes (module docstring): `dtype` the
    plan's, `stored` the source model's element type, `size` max |reference|, `noise` the
    reference's spread (`rounding`; for a model stored in fp16, its rounding), `step` the
    output tensor's scale at int8 (`int8_step`)."""
    if dtype == "int8":
        if step is None:
            raise ValueError("an int8 tolerance needs the output tensor's scale")
        return INT8_UNITS * step
    if stored == "float16":
        return max(RTOL["float16"] * size, NOISE_STORED * (noise or 0.0))
    if dtype == "float16":
        return max(ULPS * ulp16(size), NOISE * (noise or 0.0))
    return max(RTOL[dtype] * size, NOISE * (noise or 0.0))


@dataclass(frozen=True)
class Verdict:
    """A CNN's verdict: PASS, FAIL, or n/a (no reference model, or not checked), with the
    largest difference, the largest reference output, the difference relative to it, the
    tolerance, the reference's precision, the reference's own rounding (its spread: from the
    fp32 network at fp16, from the plain-kernel computation at fp32) and, for a model stored
    in fp16, the precision it is judged at."""
    verdict: str
    max_abs_diff: float | None = None
    max_abs_output: float | None = None
    relative_diff: float | None = None
    tolerance: float | None = None
    reference_dtype: str | None = None
    rounding: float | None = None
    stored_dtype: str | None = None
    reason: str | None = None
    statistic: str | None = None        # "rms": judged on the rms difference (per-layer plans)
    largest_diff: float | None = None   # then the largest difference, reported beside it

    def to_dict(self) -> dict[str, Any]:
        """As run.json holds it: the fields that apply."""
        return {k: v for k, v in asdict(self).items()
                if v is not None or k in ("rounding",) and self.tolerance is not None}


def judge(diffs: Mapping[str, float | None], sizes: Mapping[str, float | None], dtype: str,
          noise: Mapping[str, float | None], stored: Mapping[str, str] | None = None,
          scales: ActivationScales | None = None,
          outputs: Mapping[str, str | list[str]] | None = None) -> dict[str, Verdict]:
    """The verdict per CNN from its largest difference (`diffs`, None: not compared) and
    largest reference output (`sizes`): PASS, FAIL, or "n/a" when there is no reference to
    compare with. `noise`: per CNN the reference's spread (`rounding`); `stored`: per CNN
    the element type its source model computes in (reference.stored_dtype); fp16 there
    means an fp16 yardstick. An int8 plan: `scales` the deployment's activation scales,
    `outputs` per CNN its output's "cnn/layer" key(s)."""
    verdicts = {}
    for name, diff in diffs.items():
        kept = (stored or {}).get(name)
        computes = "float16" if "float16" in (dtype, kept) else dtype
        size = sizes.get(name)
        if diff is None or size is None:
            verdicts[name] = Verdict("n/a", reason="no reference model or --no-check")
            continue
        step = int8_step(scales, outputs[name]) if dtype == "int8" and scales and outputs else None
        tol = tolerance(dtype, kept, size, noise.get(name), step)
        verdicts[name] = Verdict(
            "PASS" if diff <= tol and np.isfinite(diff) else "FAIL", diff, size,
            diff / size if size else (0.0 if diff == 0 else float("inf")), tol, computes,
            noise.get(name), computes if computes != dtype else None)
    return verdicts


def _per_layer(manifest, rms, diffs, sizes, noise, stored) -> dict[str, Verdict]:
    """Verdicts of a deployment with a precision per layer (module docstring): the root mean
    square difference `rms` against NOISE_RMS x the reference's own (`noise`, `rms_spread`),
    floored by the one-precision tolerance of the type the CNN's output is stored in."""
    out: dict[str, Verdict] = {}
    quant = manifest.quantization
    for name, info in manifest.cnns.items():
        diff, size = rms.get(name), sizes.get(name)
        if diff is None or size is None or name not in diffs:
            out[name] = Verdict("n/a", reason="no reference model or --no-check")
            continue
        kinds = {manifest.dtype_of(name, o.layer) for o in info.outputs}
        if kinds & set(QUANT_DTYPES):
            kind, floor = "int8", tolerance("int8", None, size, None,
                                            int8_step(quant, [key(name, o.layer) for o in info.outputs]))
        else:
            kind = "float16" if "float16" in kinds else "float32"
            floor = tolerance(kind, None, size, None)
        tol = max(floor, NOISE_RMS * (noise.get(name) or 0.0))
        out[name] = Verdict("PASS" if diff <= tol and np.isfinite(diff) else "FAIL", diff, size,
                            diff / size if size else (0.0 if diff == 0 else float("inf")), tol,
                            kind, noise.get(name), statistic="rms", largest_diff=diffs.get(name))
    return out


def failed(verdicts: Mapping[str, Verdict]) -> bool:
    return any(v.verdict == "FAIL" for v in verdicts.values())


def for_run(deploy_dir: str | Path, diffs: Mapping[str, float | None],
            sizes: Mapping[str, float | None], frames: dict[str, Any],
            threads: int = 0, rms: Mapping[str, float] | None = None) -> dict[str, Verdict]:
    """The verdicts of `explore run` for a run whose outputs were compared on `frames` (per
    CNN, the frames compared: the leading seeded ones, or the caller's own), with its
    largest differences `diffs` and largest reference outputs `sizes`; a deployment with a
    precision per layer is judged on its root mean square differences `rms`."""
    from deploy.runtime import manifest as mf
    manifest = mf.load(deploy_dir)
    # the spread over the frames whose outputs were compared
    noise = rounding(deploy_dir, manifest, {n: list(s) for n, s in frames.items()}, threads)
    stored = {name: reference.stored_dtype(Path(deploy_dir) / info.reference)
              for name, info in manifest.cnns.items() if info.reference}
    quant = manifest.quantization
    if manifest.per_layer:
        return _per_layer(manifest, rms or {}, diffs, sizes, noise, stored)
    if quant is not None:          # int8: judged in steps of each output's scale
        outputs = {name: [key(name, o.layer) for o in info.outputs]
                   for name, info in manifest.cnns.items()}
        return judge(diffs, sizes, "int8", noise, stored, quant, outputs)
    return judge(diffs, sizes, manifest.dtype, noise, stored)

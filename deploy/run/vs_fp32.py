"""How far a deployment at reduced precision (fp16, mixed, int8) lies from the fp32 model, on the
frames a run compared: the cost of the precision, beside the verdict, which judges the
deployment against a reference at the plan's own precision (deploy/run/verdict.py) and so
cannot see it. With the user's own frames (`explore run --input`) this is their accuracy check.

The fp32 model is the one the app names: for fp16 and mixed deployments the deployment's own
copy of it (its reference file, which the verdict rounds as the deployment rounds), for int8
the source file whose path and SHA-256 the manifest records (`CnnInfo.source`; the int8
deployment's reference file is the quantized model). A source that is missing, changed since
`explore deploy`, already quantized (QDQ) or stored in fp16 leaves the comparison unavailable
with the reason, and the run goes on: the verdict does not depend on it.

Per output, over all compared frames together (float64 sums, `Accumulator`):

- SQNR = 10 log10(sum x^2 / sum (y - x)^2) dB, x the fp32 output, y the deployment's
  (infinite when they are equal);
- cosine similarity sum(x y) / sqrt(sum x^2 sum y^2) (1 when both are all zeros, 0 when one is);
- argmax agreement: the share of positions (frame, row, column) where the largest channel
  (axis 1 of the output's NCHW form) is the same; None for an output of one channel;
- max |y - x|.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np


@dataclass(frozen=True)
class OutputDeviation:
    """One output's deviation from the fp32 model (module docstring)."""
    output: str
    sqnr_db: float
    cosine: float
    argmax_agreement: float | None
    max_abs_diff: float

    def to_dict(self) -> dict[str, Any]:
        """JSON form: an infinite SQNR (identical outputs, or an all-zero fp32 output that the
        deployment does not match: `max_abs_diff` tells which) as null."""
        return {"output": self.output,
                "sqnr_db": self.sqnr_db if math.isfinite(self.sqnr_db) else None,
                "cosine": self.cosine, "argmax_agreement": self.argmax_agreement,
                "max_abs_diff": self.max_abs_diff}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "OutputDeviation":
        sqnr = data.get("sqnr_db")
        if sqnr is None:
            sqnr = math.inf if data.get("max_abs_diff") == 0 else -math.inf
        return cls(data["output"], float(sqnr), float(data["cosine"]),
                   data.get("argmax_agreement"), float(data["max_abs_diff"]))


@dataclass(frozen=True)
class VsFp32:
    """A CNN's deviation from its fp32 model: `model` the file compared with, `frames` how
    many, `outputs` per output; or, when unavailable, `reason` (and no outputs)."""
    model: str | None = None
    frames: int = 0
    outputs: tuple[OutputDeviation, ...] = ()
    reason: str | None = None
    estimate_db: float | None = None     # a per-layer plan's SQNR estimate (explore's)

    @property
    def available(self) -> bool:
        return self.reason is None

    def to_dict(self) -> dict[str, Any]:
        if not self.available:
            return {"available": False, "reason": self.reason}
        return {"available": True, "model": self.model, "frames": self.frames,
                "outputs": [o.to_dict() for o in self.outputs],
                **({"sqnr_estimate_db": self.estimate_db} if self.estimate_db is not None else {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "VsFp32":
        if not data.get("available"):
            return cls(reason=str(data.get("reason")))
        return cls(data.get("model"), int(data.get("frames", 0)),
                   tuple(OutputDeviation.from_dict(o) for o in data.get("outputs", ())),
                   estimate_db=data.get("sqnr_estimate_db"))


class Accumulator:
    """The sums of `OutputDeviation` over frames, one output at a time as they come."""

    def __init__(self, names: Sequence[str]):
        self.names = list(names)
        n = len(self.names)
        self.signal, self.noise, self.dot, self.power = [0.0] * n, [0.0] * n, [0.0] * n, [0.0] * n
        self.agree, self.positions = [0] * n, [0] * n
        self.worst = [0.0] * n
        self.frames = 0

    def add(self, got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> None:
        """One frame: the deployment's outputs `got` and the fp32 model's `want`, in order;
        each `want` is reshaped to its `got` (NCHW)."""
        for k, (g, w) in enumerate(zip(got, want)):
            y = np.asarray(g, np.float64)
            x = np.asarray(w, np.float64).reshape(y.shape)
            d = y - x
            self.signal[k] += float(np.sum(x * x))
            self.noise[k] += float(np.sum(d * d))
            self.dot[k] += float(np.sum(x * y))
            self.power[k] += float(np.sum(y * y))
            self.worst[k] = max(self.worst[k], float(np.max(np.abs(d))) if d.size else 0.0)
            if y.ndim >= 2 and y.shape[1] > 1:
                self.agree[k] += int(np.sum(np.argmax(y, axis=1) == np.argmax(x, axis=1)))
                self.positions[k] += y.size // y.shape[1]
        self.frames += 1

    def result(self) -> tuple[OutputDeviation, ...]:
        out = []
        for k, name in enumerate(self.names):
            s, n = self.signal[k], self.noise[k]
            sqnr = math.inf if n == 0 else (-math.inf if s == 0 else 10 * math.log10(s / n))
            p = self.power[k]
            cosine = (1.0 if s == 0 and p == 0 else 0.0 if s == 0 or p == 0
                      else self.dot[k] / math.sqrt(s * p))
            agree = self.agree[k] / self.positions[k] if self.positions[k] else None
            out.append(OutputDeviation(name, sqnr, cosine, agree, self.worst[k]))
        return tuple(out)


def fp32_model(deploy_dir: str | Path, manifest, name: str) -> tuple[Path | None, str | None]:
    """(the fp32 model of CNN `name`, None) or (None, why there is none to compare with)."""
    from deploy.checks.files import digest
    from deploy.checks.reference import stored_dtype
    info = manifest.cnns[name]
    if info.reference is None:
        return None, "no ONNX model (a zoo network): nothing to compare with"
    own = manifest.quantization is not None or manifest.per_layer   # the source model itself
    if not own:                               # fp16, mixed: the reference is the model's copy
        path = Path(deploy_dir) / info.reference
        if stored_dtype(path) != "float32":
            return None, f"the app's model ({info.reference}) is stored in fp16: it has no fp32 form"
        return path, None
    source = info.source
    if source is None:
        return None, "the manifest records no source model; deploy again to record it"
    if source.kind == "qdq":
        return None, f"the app's model {source.path} is already quantized (QDQ): it has no fp32 form"
    if source.kind != "float32":
        return None, f"the app's model {source.path} is stored in fp16: it has no fp32 form"
    path = Path(source.path)
    if not path.is_file():
        return None, f"the fp32 model {source.path} is not found (moved or deleted since `explore deploy`)"
    if digest(path) != source.sha256:
        return None, (f"the fp32 model {source.path} changed since `explore deploy` (its SHA-256 "
                      f"differs from the manifest's)")
    return path, None


def compare(deploy_dir: str | Path, manifest, name: str, frames: Iterable[np.ndarray],
            outputs: Iterable[Sequence[np.ndarray]], threads: int = 0) -> VsFp32:
    """CNN `name`'s deviation from its fp32 model: each frame of `frames` run by a plain ONNX
    Runtime session on that model, against the deployment's `outputs` of the same frame."""
    from deploy.checks import reference
    path, reason = fp32_model(deploy_dir, manifest, name)
    if path is None:
        return VsFp32(reason=reason)
    sess = reference.session(path, threads)
    info = manifest.cnns[name]
    acc = Accumulator([p.tensor or p.layer for p in info.outputs])
    for frame, got in zip(frames, outputs):
        acc.add(got, reference.run(sess, frame))
    shown = str(path) if manifest.quantization is not None or manifest.per_layer else info.reference
    return VsFp32(shown, acc.frames, acc.result(), estimate_db=manifest.plan_sqnr_estimate_db.get(name))

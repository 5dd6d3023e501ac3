"""Where a CNN's int8 activation scales came from, kept in the deployment's manifest (under
`quantization.origins`) so that its run can say it: calibrated by a method
(deploy/quant/methods.py) on the user's frames (`explore deploy --calibration FILE`) or on
generated standard-normal frames, or taken from a model already quantized (QDQ).

Scales from generated frames fit what real input will not (docs/precision.md measures the
cost on a text detector), which is why a run names them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sdf3.errors import InputError

FRAMES = ("file", "generated", "model")


@dataclass(frozen=True)
class ScalesOrigin:
    """`frames`: "file" (the user's, `path`), "generated" (seeded standard normals) or
    "model" (a QDQ model's own scales: no `method`, no frames); `count` frames calibrated on."""
    frames: str
    method: str | None = None
    count: int = 0
    path: str | None = None

    @property
    def generated(self) -> bool:
        return self.frames == "generated"

    def words(self) -> str:
        """One phrase for a run's output."""
        if self.frames == "model":
            return "the QDQ model's own scales"
        on = (f"{self.count} generated standard-normal frames (not real input: give "
              f"`explore deploy --calibration FRAMES`)" if self.generated
              else f"{self.count} frames of {self.path}")
        return f"{self.method} calibration on {on}"

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in (("frames", self.frames), ("method", self.method),
                                  ("count", self.count), ("path", self.path)) if v is not None}

    @classmethod
    def from_json(cls, data: Any, where: str) -> "ScalesOrigin":
        if not isinstance(data, dict) or data.get("frames") not in FRAMES \
                or not isinstance(data.get("count", 0), int) \
                or not all(isinstance(data.get(k), (str, type(None))) for k in ("method", "path")):
            raise InputError(f"{where}: expected 'frames' ({', '.join(FRAMES)}), an integer "
                             f"'count' and optional 'method' and 'path' strings, got {data!r}")
        return cls(data["frames"], data.get("method"), data.get("count", 0), data.get("path"))

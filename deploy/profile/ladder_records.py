"""What the ladder's measurements hand on (deploy/profile/ladder.py): one deployment as
timed (`StepTimes`, JSON between the timing child and its parent) and one layer's figures
over the ladder's deployments (`LadderTimes`, which deploy/profile/app_profile.py turns into
the profile's LayerTimes)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deploy.profile.workspace_probe import ProbeJob


@dataclass(frozen=True)
class StepTimes:
    """One deployment timed (`step_times`): ms per frame by layer, the frame's ms, calls
    per frame, the heap one call's binding keeps (None where glibc does not report it) and
    the workspace probe's jobs of its step models, ({layer: share}, job) each."""
    layers: dict[str, float]
    frame_ms: float
    calls: int
    call_bytes: float | None = None
    probes: tuple[tuple[dict[str, float], ProbeJob], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """What the timing child prints for its parent (`step_times_in_child`)."""
        return {"layers": self.layers, "frame_ms": self.frame_ms, "calls": self.calls,
                "call_bytes": self.call_bytes,
                "probes": [[shares, job.to_json()] for shares, job in self.probes]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepTimes:
        fields = dict(data)
        probes = tuple((shares, ProbeJob.from_json(job)) for shares, job in fields.pop("probes"))
        return cls(**fields, probes=probes)


@dataclass(frozen=True)
class LadderTimes:
    """One layer as the ladder's deployments measured it (`Ladder.table`): whole (None
    where it never ran whole), `by_phases` {Φ: ms per frame} with every layer in parts and
    `region` {Φ: the parameters of its by-parts region there}, `alone` {Φ: ms} with its
    neighbours whole, `beside_ms` whole beside a layer in parts (median); the bytes of the
    step models computing it: whole, per Φ in the bands (`band_*`) and alone (`alone_*`),
    whole beside parts per ring side (`beside_*`, None if never), and `call_bytes`, the heap
    one call's binding keeps."""
    whole_ms: float | None = None
    by_phases: dict[int, float] = field(default_factory=dict)
    region: dict[int, float] = field(default_factory=dict)
    alone: dict[int, float] = field(default_factory=dict)
    beside_ms: float | None = None
    whole_session_bytes: int | None = None
    whole_ws_bytes: int | None = None
    band_session_bytes: dict[int, int] = field(default_factory=dict)
    band_ws_bytes: dict[int, int] = field(default_factory=dict)
    alone_session_bytes: dict[int, int] = field(default_factory=dict)
    alone_ws_bytes: dict[int, int] = field(default_factory=dict)
    beside_session_bytes: dict[str, int] | None = None
    beside_ws_bytes: dict[str, int] | None = None
    call_bytes: int | None = None

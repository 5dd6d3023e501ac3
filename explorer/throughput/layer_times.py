"""A layer's measured times and bytes on one device, as `explore profile` files them
(explorer/throughput/device_profile.py reads the files), and how a plan's context is
placed among the contexts the profile measured: phase counts between the ladder's rungs
(`ms`), a region between the layer alone and the ladder's (`ms_in`, `band_bytes`, `share`;
csdf/regions.py says why regions matter).
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import asdict, dataclass, field, fields
from itertools import accumulate
from typing import Any

from explorer.throughput.runtime_costs import LayerBytes

BYTES = tuple(f.name for f in fields(LayerBytes))       # a profile's per-layer byte keys


@dataclass(slots=True)
class LayerTimes:
    """Measured times of one layer (milliseconds), and the runtime's bytes for it (`bytes`)."""
    whole_ms: float
    part_ms: float | None = None     # one phase, when run in `phases` phases
    phases: int | None = None
    # measured time of the whole layer per frame (all its phases) at phase counts Φ of the
    # granularity ladder {Φ: ms} (explore profile; docs/throughput.md); wins when present
    by_phases: dict[int, float] = field(default_factory=dict)
    # the context of `by_phases` and a second one (explore profile; csdf/regions.py):
    # `region` {Φ: parameters of the layer's by-parts region in the deployment that measured
    # by_phases}, `alone` {Φ: ms per frame measured with every neighbour whole}
    region: dict[int, float] = field(default_factory=dict)
    alone: dict[int, float] = field(default_factory=dict)
    # the layer whole with a neighbour in parts (it reads or writes rows rings, not ONNX
    # Runtime's blocked layout): median over the profile's deployments where it was so
    beside_ms: float | None = None
    # the runtime's bytes of the layer's step models (explorer/throughput/runtime_costs.py)
    bytes: LayerBytes = field(default_factory=LayerBytes)

    def band_bytes(self, phases: int, alone: bool = False, region: float | None = None,
                   own: float = 0.0, side: str | None = None) -> tuple[int, int] | None:
        """LayerBytes.band_bytes with the `share` of a by-parts region of `region`
        parameters (`own`: the layer's) between the layer alone and the ladder's region."""
        share = None if region is None else self.share(phases, region, own)
        return self.bytes.band_bytes(phases, alone, share, side)

    def share(self, phases: int, region: float, own: float) -> float:
        """Where a by-parts region of `region` parameters lies between the layer alone (0:
        region = own) and the ladder's region at Φ (1), clamped; 1 where the profile
        measured no regions (csdf/regions.py says why regions matter)."""
        if not self.region:
            return 1.0
        span = _interpolate(self.region, phases) - own
        return 1.0 if span <= 0 else min(1.0, max(0.0, (region - own) / span))

    def ms(self, phases: int, default_phase_ms: float = 0.0, monotone: bool = True) -> float:
        """Time in `phases` phases: with `by_phases`, linear between the nearest measured
        phase counts (whole = Φ 1; beyond the last, extended by its last slope), each
        measured time raised to the largest at fewer phases; else linear between whole (Φ=1)
        and the measured parts (Φ=phases), never below whole. Either way more phases never
        run faster: a measured dip (1-8% on 11 of ResNet-50's 70 layers in one profile) is the
        shared machine's noise, and it would let a finer plan dominate a coarser one.
        `monotone` False (a profile that timed region steps): the measured points as they
        are. A band's one call is shared among its layers by work (deploy/profile/ladder.py),
        so a layer's share moves with the band's other layers from rung to rung, not with
        its own phases: MobileNetV2's features_2_dw measured 0.54, 0.59, 0.46, 0.14 ms at
        Φ 2, 4, 7, 14, and the running maximum priced a plan with it at Φ 14 (measured
        0.16 ms) at 0.59, the plan's whole frame 23% slow."""
        if self.by_phases and phases > 1:
            return _interpolate({1: self.whole_ms, **self.by_phases}, phases, monotone)
        if phases <= 1:
            return self.whole_ms
        if self.part_ms is None or not self.phases or self.phases <= 1:
            return self.whole_ms + (phases - 1) * default_phase_ms
        slope = (self.part_ms * self.phases - self.whole_ms) / (self.phases - 1)
        return self.whole_ms + (phases - 1) * max(0.0, slope)

    def ms_in(self, phases: int, region: float, own: float,
              default_phase_ms: float = 0.0, beside: bool = False, monotone: bool = True) -> float:
        """Time in `phases` phases inside a by-parts region of `region` parameters (`own`:
        the layer's): between the time alone (region = own) and the ladder's (region = the
        ladder's region at Φ), linear in the region's parameters and clamped to the two
        measured contexts (csdf/regions.py says why). Without `alone`: ms().
        Whole (Φ 1): `beside_ms` when `beside` (a neighbour in parts) and measured."""
        if phases <= 1:
            return self.beside_ms if beside and self.beside_ms is not None else self.whole_ms
        ladder = self.ms(phases, default_phase_ms, monotone)
        if not self.alone or not self.region:
            return ladder
        alone = _interpolate({1: self.whole_ms, **self.alone}, phases, monotone)
        return alone + self.share(phases, region, own) * (ladder - alone)


def _interpolate(points: dict[int, float], x: int, monotone: bool = True) -> float:
    """Piecewise-linear through the measured (Φ, ms) points, each raised to the largest ms
    at a smaller Φ when `monotone` (a running maximum: never faster with more phases);
    outside them, the nearest segment extended (a single point: that value)."""
    xs = sorted(points)
    ys = list(accumulate((points[v] for v in xs), max)) if monotone else [points[v] for v in xs]
    if len(xs) == 1:
        return ys[0]
    at = bisect_left(xs, x)
    if at < len(xs) and xs[at] == x:
        return ys[at]
    hi = min(max(at, 1), len(xs) - 1)         # the segment around x, or the nearest one
    lo = hi - 1
    slope = (ys[hi] - ys[lo]) / (xs[hi] - xs[lo])
    return max(0.0, ys[lo] + slope * (x - xs[lo]))


def from_flat(whole_ms: float, **flat: Any) -> LayerTimes:
    """A LayerTimes from one layer's entry as a profile file keeps it: times and bytes under
    one level of keys (None: not measured)."""
    got = {k: v for k, v in flat.items() if v is not None}
    return LayerTimes(whole_ms, **{k: v for k, v in got.items() if k not in BYTES},
                      bytes=LayerBytes(**{k: v for k, v in got.items() if k in BYTES}))


def to_flat(t: LayerTimes) -> dict[str, Any]:
    """One layer's entry as a profile file keeps it (from_flat's inverse)."""
    out = {k: v for k, v in asdict(t).items() if k != "bytes"}
    return out | asdict(t.bytes)

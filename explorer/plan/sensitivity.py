"""The per-layer sensitivity table of a CNN and the output error it predicts for a choice of
precisions per layer (`precision: auto`, docs/precision.md "Per layer").

A table row is the SQNR of the CNN's output against its fp32 output, in dB, with one stored
tensor alone at a lower precision (its layer's output rounded as a deployment stores it, and
that layer's weights as a deployment holds them): measured by deploy/checks/sensitivity.py on
calibration frames, never computed here. A CNN with several outputs keeps the lowest SQNR of
its outputs.

The estimate for a plan adds the layers' noise powers: with each layer's rounding an
independent noise source, the output's noise is the sum of what each source alone gives, so
1 / SQNR = sum_i 1 / SQNR_i in linear terms (Lin, Talathi & Annapureddy, "Fixed Point
Quantization of Deep Convolutional Networks", ICML 2016, Section 3; Widrow & Kollar,
"Quantization Noise", 2008), i.e. SQNR_dB = -10 log10(sum_i 10^(-SQNR_i/10)). With one row per
output taken as the lowest over outputs, the sum bounds every output's noise from above.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Mapping

from csdf.model import CNN
from explorer.app.layer_precision import LayerPrecisions

REFERENCE = "fp32"          # a layer at fp32 adds no noise: the table has no row for it


@dataclass(frozen=True)
class Sensitivity:
    """One CNN's table: `rows` (layer, precision, SQNR dB), sorted; `key` what it was measured
    on (deploy/checks/sensitivity.py: model, frames, calibration method, ONNX Runtime)."""
    rows: tuple[tuple[str, str, float], ...]
    key: str = ""
    frames: int = 0

    def sqnr_db(self, layer: str, precision: str) -> float | None:
        """The row's SQNR; infinite at fp32; None when the table has no such row."""
        if precision == REFERENCE:
            return math.inf
        return self._index.get((layer, precision))

    def layers(self) -> list[str]:
        """Layers with a row, in the table's order."""
        return list(dict.fromkeys(layer for layer, _, _ in self.rows))

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "frames": self.frames,
                "rows": [{"layer": l, "precision": p, "sqnr_db": _finite(s)} for l, p, s in self.rows]}

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> "Sensitivity":
        rows = tuple(sorted((str(r["layer"]), str(r["precision"]),
                             math.inf if r["sqnr_db"] is None else float(r["sqnr_db"]))
                            for r in data["rows"]))
        return Sensitivity(rows, str(data.get("key", "")), int(data.get("frames", 0)))

    @cached_property
    def _index(self) -> dict[tuple[str, str], float]:
        return {(l, p): s for l, p, s in self.rows}


def _finite(value: float) -> float | None:
    """JSON has no infinity: an output the rounding leaves unchanged is null."""
    return value if math.isfinite(value) else None


def noise_power(sqnr_db: float) -> float:
    """Noise over signal power of an SQNR in dB (0 for an infinite SQNR)."""
    return 0.0 if sqnr_db == math.inf else 10.0 ** (-sqnr_db / 10.0)


def estimate_db(table: Sensitivity, graph: CNN, cnn: str, layers: LayerPrecisions) -> float:
    """The output's SQNR in dB that `table` predicts for CNN `cnn` (graph `graph`) with each
    layer at its precision in `layers`: the layers' noise powers added (module docstring).
    Each stored tensor counts at the precision it is stored at (a CNN input at its widest
    reader's). Raises KeyError for a layer below fp32 with no row in the table."""
    noise = 0.0
    for name in graph.order():
        precision = layers.tensor(graph, cnn, name).name
        if precision == REFERENCE:
            continue
        sqnr = table.sqnr_db(name, precision)
        if sqnr is None:
            raise KeyError(f"{cnn}.{name} at {precision}: no row in the sensitivity table")
        noise += noise_power(sqnr)
    return math.inf if noise == 0 else -10.0 * math.log10(noise)

"""What one run (a search, a report) keeps across the derivations of its chromosomes: an
object its owner creates (explorer.plan.derive.Evaluation makes one per search) and passes
down to derive, the schedule policies, reordering, placement and the memory model. Every
function that takes one also runs without it; a cache only saves time, never changes an
answer (tests/csdf/test_analysis_cache.py).

- `analysis`: the CNN side's windows, rates and partition analyses (csdf.analysis_cache);
- `views`: explorer.plan.derive's per-partition views, by partition and phases;
- `placements`: the last few placements, by (uses, pipelines, planner): the schedule
  policies place each candidate's edges and derive places the winner's again, often the
  very same uses, which give the same buffers (planners are deterministic);
- per CNN (`of`, emptied when the CNN's graph changes): least-peak orders of
  explorer.memory.reorder, the edge list of explorer.memory.lifetimes, the stored
  parameter count of explorer.memory.buffers.

A copy pickled to another process (a cluster worker) starts empty.
"""
from __future__ import annotations

from typing import Any

from csdf.analysis_cache import AnalysisCache, PerCNN, Recent
from csdf.model import CNN

VIEWS = 2048          # partition views kept (oldest dropped first)
ANALYSES = 2          # full partition analyses kept per CNN: the views are what recur
PLACEMENTS = 8        # placements kept


class CNNMemory:
    """What is kept for one CNN."""

    def __init__(self) -> None:
        self.orders: dict[tuple, Any] = {}             # explorer.memory.reorder.Order
        self.edges: list[tuple[str, str, str, int]] | None = None   # lifetimes' edge list
        self.params: int | None = None                 # stored parameters, elements


class RunCache:
    def __init__(self, views: int = VIEWS, analyses: int = ANALYSES,
                 placements: int = PLACEMENTS):
        self.analysis = AnalysisCache(analyses)
        self.views: Recent[Any] = Recent(views)
        self.placements: Recent[Any] = Recent(placements)
        self.cnns: PerCNN[CNNMemory] = PerCNN(CNNMemory)

    def of(self, cnn: CNN) -> CNNMemory:
        return self.cnns.of(cnn)

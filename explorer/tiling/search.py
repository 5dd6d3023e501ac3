"""The combined search over row parts and fused tiles, built so its front is never worse
than either mode's front alone.

NSGA-II over the longer chromosome (explorer/tiling/genes.py, mode "both") is a larger
space than either mode's: with the same population and generations it can miss points each
single-mode search finds. So `search_modes` runs the row-parts search and the fused-tiles
search first, embeds their fronts in the combined chromosome (a row-parts point keeps its
layer genes with every tiling gene 0; a tiled point has every layer gene 0 and its tiling
genes), and runs the combined search with them as seeds of its initial population
(explorer.search.algorithm2.nsga2 `seeds`). The combined front is DEAP's ParetoFront of every
chromosome evaluated, seeds included, and an embedded chromosome evaluates to exactly its
single-mode memory and fps (the same derivation with no group, or with every layer whole),
so every point of either single-mode front is weakly dominated by a combined point: by
construction, checked by `dominated_count` in tests and in benchmarks/fused_tiling.py.
Cost: the three searches' evaluations together.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from explorer.app.model import Application, SearchSettings
from explorer.search.algorithm2 import Outcome, algorithm2
from explorer.search.deadline import NONE, Deadline
from explorer.search.pick import Point
from explorer.search.progress import Progress
from explorer.tiling.genes import TiledEvaluation


@dataclass
class ModeSearch:
    """One mode's evaluation (for plans and derivations) and its search's outcome."""

    evaluation: TiledEvaluation
    outcome: Outcome

    @property
    def front(self) -> list[Point]:
        return self.outcome.front


def embed(point_genes, mode: str, both: TiledEvaluation) -> tuple[int, ...]:
    """A single-mode chromosome as the combined one (module doc)."""
    n_layer = len(both.space.layer.layers) if both.space.layer else 0
    n_tiles = len(both.space.slots)
    genes = tuple(int(g) for g in point_genes)
    if mode == "parts":
        return genes + (0,) * n_tiles
    if mode == "tiles":
        return (0,) * n_layer + genes
    raise ValueError(f"mode: expected parts or tiles, got {mode!r}")


def search_modes(app: Application, evaluator, settings: SearchSettings,
                 granularity: str = "binary", progress: Progress | None = None,
                 deadline: Deadline = NONE) -> dict[str, ModeSearch]:
    """{"parts", "tiles", "both"}: the two single-mode searches, then the combined search
    seeded with their fronts (module doc). Same settings (seed included) for all three;
    `deadline` is shared: the parts search gets a third of the time left, the tiles search
    half of what is left then, the combined search the rest."""
    out: dict[str, ModeSearch] = {}
    for mode, share in (("parts", 1 / 3), ("tiles", 1 / 2)):
        ev = TiledEvaluation(app, evaluator, mode, granularity)
        out[mode] = ModeSearch(ev, algorithm2(app, ev, settings, progress,
                                              deadline=deadline.share(share)))
    both = TiledEvaluation(app, evaluator, "both", granularity)
    seeds = [embed(p.genes, mode, both) for mode in ("parts", "tiles") for p in out[mode].front]
    out["both"] = ModeSearch(both, algorithm2(app, both, settings, progress, seeds,
                                              deadline=deadline))
    return out


def combined_search(app: Application, problem: TiledEvaluation, settings: SearchSettings,
                    progress: Progress | None = None, deadline: Deadline = NONE) -> Outcome:
    """The search of mode "both" for `problem` (its evaluator and granularity), called as
    algorithm2 is: search_modes' combined outcome, its stages after the parts and tiles
    searches' own (named "parts ...", "tiles ...")."""
    modes = search_modes(app, problem.evaluator, settings, problem.granularity, progress, deadline)
    outcome = modes["both"].outcome
    outcome.result.stages = [replace(s, name=f"{mode} {s.name}") for mode in ("parts", "tiles")
                             for s in modes[mode].outcome.result.stages] + outcome.result.stages
    return outcome


def weakly_dominated(point: Point, front: list[Point], cnns: list[str]) -> bool:
    """Some point of `front` has no more memory and no less fps for every CNN."""
    return any(q.memory_bytes <= point.memory_bytes
               and all(q.fps[c] >= point.fps[c] for c in cnns) for q in front)


def dominated_count(front: list[Point], combined: list[Point], cnns: list[str]) -> int:
    """How many points of `front` the combined front weakly dominates."""
    return sum(weakly_dominated(p, combined, cnns) for p in front)

"""Algorithm 2 on DEAP: NSGA-II over one integer gene per layer (explorer.plan.genes: an index
into the layer's ladder of rows per phase, 0 = whole; the paper's binary gene is the
two-rung ladder), for any search problem (explorer/search/problem.py): the early exit, the
search (explorer/search/genetic.py's NSGA-II, or explorer/search/staged.py's stages for
ladder genes) and the pick.

Each generation's new chromosomes are evaluated as one batch, which explorer.search.parallel
spreads over worker processes (`search.workers`); the answers, and so the front, are the same.
A seed gives the same front every time.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from explorer.app.model import SearchSettings
from explorer.search.deadline import Deadline
from explorer.search.effort import Refit
from explorer.search.genetic import SearchResult, mutate_one_gene, nsga2
from explorer.search.pick import Point
from explorer.search.problem import Evaluate, Key, Problem
from explorer.search.progress import GenerationStats, Progress, StageTime, stderr_progress
from explorer.search.staged import ladder_search

__all__ = ["GenerationStats", "Outcome", "SearchResult", "algorithm2", "mutate_one_gene",
           "nsga2", "stderr_progress"]


@dataclass
class Outcome:
    """Algorithm 2's answer: the front, the chosen point (lines 9-16) and how it was found."""
    front: list[Point]
    chosen: Point
    met: bool
    result: SearchResult
    genes: list[str]                      # gene labels "cnn.layer", in gene order
    rule: str = "memory"                  # the rule that chose (explorer.search.pick.pick_rule)


def _spread(evaluate: Evaluate, settings: SearchSettings):
    """Where the evaluations run: a Dask cluster (explorer/search/cluster.py) when the settings
    name one, else the local pool of `workers` processes (explorer/search/parallel.py)."""
    if settings.cluster:
        from explorer.search.cluster import cluster_pool
        return cluster_pool(evaluate, settings.cluster)
    from explorer.search.parallel import evaluation_pool
    return evaluation_pool(evaluate, settings.workers)


def algorithm2(app, problem: Problem, settings: SearchSettings | None = None,
               progress: Progress | None = None, seeds: list[Key] | None = None,
               seeded: bool = True, deadline: Deadline | None = None,
               refit: Refit | None = None) -> Outcome:
    """Algorithm 2 as published: early exit when reuse alone (every layer one phase) meets
    M^c; otherwise NSGA-II over the problem's genes; then the pick. `seeds` go to NSGA-II's
    initial population. A staged space (`problem.space.staged`: ladder genes) runs
    explorer.search.staged.ladder_search (the binary search first, its front and the space's
    seeds in the ladder population, `seeds` after them); `seeded=False` runs the plain
    NSGA-II on it instead. `deadline`: the run's time budget (default: the settings'
    `time_limit` from now); `refit`: the effort of a ladder search's later stages fitted
    again from its binary stage's rate (explorer.search.effort.Refit)."""
    from explorer.search.pick import pick, pick_rule, search_needed

    settings = settings or app.search
    deadline = deadline if deadline is not None else Deadline(settings.time_limit)
    space = problem.space
    labels, upper = list(space.labels), list(space.upper)
    cnns = list(app.cnns)
    start = time.perf_counter()
    zeros = (0,) * len(labels)
    mem, fps = problem(zeros)
    reuse = Point(zeros, int(mem), {c: float(fps.get(c, 0.0)) for c in cnns})
    if not labels or not search_needed(reuse, app.memory, app.fps, app.prefer):
        seconds = time.perf_counter() - start
        result = SearchResult([reuse], evaluations=1, unique=1, seconds=seconds,
                              early_exit=True, stages=[StageTime("reuse only", seconds, 1)])
    else:
        with _spread(problem, settings) as spread:
            if seeded and space.staged:
                result = ladder_search(space, cnns, spread, settings, progress, seeds, deadline,
                                       refit)
            else:
                result = nsga2(upper, cnns, spread, settings, progress, seeds, deadline)
    chosen, met = pick(result.front, app.memory, app.fps, app.prefer)
    return Outcome(result.front, chosen, met, result, labels,
                   pick_rule(app.memory, app.fps, app.prefer))

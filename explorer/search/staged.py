"""The staged search over ladder genes: the paper's binary NSGA-II, the ladder NSGA-II seeded
with its front, then a descent from its least memory, path relinking, Pareto local search
and path relinking again, each stage timed and reporting progress, all under one deadline
(explorer/search/deadline.py).
"""
from __future__ import annotations

import time

from explorer.app.model import SearchSettings
from explorer.search.effort import Refit, binary_share
from explorer.search.genetic import SearchResult, nsga2
from explorer.search.deadline import NONE, Deadline
from explorer.search.descent import STAGE as DESCENT, descend
from explorer.search.local_search import pareto_local_search
from explorer.search.parallel import Mapped
from explorer.search.path_relinking import relink
from explorer.search.pick import Point, merge_fronts
from explorer.search.problem import Batch, Key, Space
from explorer.search.progress import Progress, StageTime

DESCENT_SHARE = 0.75    # of the time the NSGA-II stages leave (benchmarks/results/search_budget.md)


def ladder_search(space: Space, cnns: list[str], evaluate: Batch, settings: SearchSettings,
                  progress: Progress | None = None, extra: list[Key] | None = None,
                  deadline: Deadline = NONE, refit: Refit | None = None) -> SearchResult:
    """NSGA-II over ladder genes that starts from the paper's search: first the binary
    search itself (Eq. 6 genes, the same settings and seed, each binary chromosome
    evaluated as its ladder twin, `space.binary`), then the ladder search seeded with that
    front and `space.seeds()`. Every point of the binary front is a ladder chromosome, so
    the least memory found is never worse than the binary genes'. The two runs' fronts are
    merged, their least-memory point improved gene by gene (explorer/search/descent.py, 75%
    of the time left then, at most one stage's cap of evaluations; a local search, so not
    with `settings.local_rounds` 0), and the front filled in
    by `settings.relink_rounds` rounds of path relinking
    (explorer/search/path_relinking.py: steps between neighbouring front points), then
    `settings.local_rounds` rounds of Pareto local search (explorer/search/local_search.py: one
    by-parts layer one rung toward whole), then path relinking once more (up to
    `relink_rounds` rounds: the pairs the local search made); evaluations, distinct
    chromosomes and time are the sum of the stages. The binary run gets 40% of the time
    left (15% at the least fitted effort: explorer.search.effort.binary_share), the ladder
    run 75% of what is left then, the descent 75% of what is left after it
    (Deadline.share); every stage after them
    stops between slices once the deadline is over, with the front it has. `refit`
    (explorer.search.effort.Refit) gives the settings of the stages after the binary run
    from the distinct evaluations per second that run observed."""
    first = nsga2(len(space.upper), cnns, Mapped(evaluate, space.binary), settings, progress,
                  deadline=deadline.share(binary_share(refit.first.level if refit else None)),
                  stage="binary NSGA-II")
    seeds = list(dict.fromkeys([space.binary(p.genes) for p in first.front] + space.seeds()
                               + [tuple(int(g) for g in e) for e in extra or ()]))
    if refit is not None:
        settings = refit(settings, first.unique, first.seconds, deadline.left())
    if deadline.over("ladder NSGA-II"):      # the binary front is the answer so far
        second = SearchResult(front=[], history=first.history)
    else:
        second = nsga2(space.upper, cnns, evaluate, settings, progress, seeds=seeds,
                       deadline=deadline.share(0.75), stage="ladder NSGA-II")
    seen = set(second.seen)
    # the binary run's points as the ladder chromosomes they were evaluated as
    twins = [Point(space.binary(p.genes), p.memory_bytes, p.fps) for p in first.front]
    front = merge_fronts(second.front, twins)
    stages = first.stages + second.stages
    cap = settings.stage_evaluations          # explorer/search/effort.py; None = no cap
    counts = {"path relinking": 0, "local search": 0, DESCENT: 0}
    if settings.local_rounds > 0 and cap != 0 and not deadline.over(DESCENT):
        start = time.perf_counter()
        front, n = descend(front, cnns, evaluate, list(space.upper), seen,
                           deadline.share(DESCENT_SHARE), cap, progress)
        counts[DESCENT] = n
        stages.append(StageTime(DESCENT, time.perf_counter() - start, n))

    def stage(name: str, limit: int | None, rounds: int) -> None:
        nonlocal front
        if limit == 0 or deadline.over(name):     # its share of the cap spent: no stage
            return
        start = time.perf_counter()
        search = relink if name == "path relinking" else pareto_local_search
        front, n = search(front, cnns, evaluate, rounds, seen, deadline, limit, progress)
        counts[name] += n
        stages.append(StageTime(name, time.perf_counter() - start, n))

    stage("path relinking", cap, settings.relink_rounds)
    # the descent and the local search share one stage's cap (explorer/search/effort.py)
    stage("local search", None if cap is None else max(0, cap - counts[DESCENT]),
          settings.local_rounds)
    # the points local search added have neighbours on the front never relinked with them
    stage("path relinking", None if cap is None else max(0, cap - counts["path relinking"]),
          settings.relink_rounds)
    last = sum(counts.values())
    return SearchResult(front=front,
                        evaluations=first.evaluations + second.evaluations + last,
                        unique=first.unique + second.unique + last,
                        seconds=sum(s.seconds for s in stages),
                        generations=max(first.generations, second.generations),
                        history=second.history, stopped=deadline.stopped, stages=stages)

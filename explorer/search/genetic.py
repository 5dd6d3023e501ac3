"""Algorithm 2's NSGA-II over a problem's integer genes: the loop of explorer/search/nsga2.py
with these operators: two-point crossover (tools.cxTwoPoint) with probability `crossover`,
then for each child with probability `mutation` one gene takes another value of its range
(`mutate_one_gene`: a flip for binary genes). The initial population holds the all-whole
(reuse only) and all-row-by-row (everything by parts, one row per phase) chromosomes, then
the `seeds` given (other searches' fronts, explorer/tiling/search.py; the space's seeds in a
staged search); the others are uniform over each gene's range.

Fitness is (M, T_1, ..., T_N) with weights (-1, +1, ..., +1): memory minimised, every CNN's
fps maximised, as the paper's (M, -T_1, ..., -T_N) minimised.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, replace

from deap import tools

from explorer.app.model import SearchSettings
from explorer.search.deadline import NONE, Deadline
from explorer.search.nsga2 import Operators, Run, population_size, run_nsga2
from explorer.search.pick import Point
from explorer.search.problem import Batch, Evaluate, Key, as_batch
from explorer.search.progress import GenerationStats, Progress, StageTime


@dataclass
class SearchResult:
    front: list[Point]                    # non-dominated points found, by memory then fps
    evaluations: int = 0
    unique: int = 0
    seconds: float = 0.0
    generations: int = 0
    early_exit: bool = False
    stopped: str | None = None            # where the time limit stopped the search, if it did
    history: list[GenerationStats] = field(default_factory=list)
    seen: set[Key] = field(default_factory=set, repr=False)   # chromosomes evaluated
    stages: list[StageTime] = field(default_factory=list)     # each stage's seconds, in order


def mutate_one_gene(individual: list[int], upper: list[int]) -> tuple[list[int]]:
    """Single-gene mutation over integer ranges 0..upper[i]: one gene chosen at random takes
    another value of its range, uniformly (a flip for a binary gene)."""
    i = random.randrange(len(individual))
    top = upper[i]
    if top == 1:
        individual[i] = 1 - individual[i]
    elif top > 1:
        value = random.randrange(top)
        individual[i] = value + (value >= individual[i])
    return (individual,)


def random_genes(upper: list[int]) -> list[int]:
    """One value per gene, uniform over 0..upper[i]."""
    return [random.randint(0, top) for top in upper]


def two_point(ind1: list[int], ind2: list[int]) -> tuple[list[int], list[int]]:
    """tools.cxTwoPoint, which needs at least two genes."""
    return tools.cxTwoPoint(ind1, ind2) if len(ind1) > 1 else (ind1, ind2)


def layer_operators(upper: list[int], seeds: list[Key], settings: SearchSettings) -> Operators:
    """Algorithm 2's initial population and variation (module doc)."""
    def initial(mu: int, make) -> list:
        pop = [make([0] * len(upper)), make(list(upper))]
        known = {tuple(ind) for ind in pop}
        for seed in seeds:
            if len(seed) != len(upper):
                raise ValueError(f"seed chromosome has {len(seed)} genes, expected {len(upper)}")
            if tuple(seed) not in known:
                known.add(tuple(seed))
                pop.append(make([int(g) for g in seed]))
        return pop + [make(random_genes(upper)) for _ in range(mu - len(pop))]

    def vary(offspring: list) -> None:
        for ind1, ind2 in zip(offspring[::2], offspring[1::2]):
            if random.random() <= settings.crossover:
                two_point(ind1, ind2)
                del ind1.fitness.values, ind2.fitness.values
            for ind in (ind1, ind2):
                if random.random() <= settings.mutation:
                    mutate_one_gene(ind, upper)
                    del ind.fitness.values

    return Operators(initial, vary)


def points(individuals, cnns: list[str]) -> list[Point]:
    """One point per distinct objective vector (the chromosome with fewest genes by parts
    wins among equals), sorted by memory, then fps (higher first)."""
    best: dict[tuple[float, ...], Point] = {}
    for ind in sorted(individuals, key=lambda i: (sum(i), tuple(i))):
        values = tuple(ind.fitness.values)
        if values not in best:
            mem, *fps = values
            best[values] = Point(tuple(ind), int(mem), dict(zip(cnns, fps)))
    return sorted(best.values(), key=lambda p: (p.memory_bytes, -sum(p.fps.values()), p.genes))


def nsga2(genes: int | list[int], cnns: list[str], evaluate: Evaluate | Batch,
          settings: SearchSettings, progress: Progress | None = None,
          seeds: list[Key] | None = None, deadline: Deadline = NONE,
          stage: str = "NSGA-II") -> SearchResult:
    """NSGA-II over `genes` binary genes, or genes with values 0..genes[i]; returns every
    non-dominated point met during the run (DEAP ParetoFront, updated with every evaluated
    chromosome, offspring that selection drops included, so the front never loses a point).
    `seeds` go into the initial population after the all-whole and all-by-parts ones; all
    of them are evaluated and enter the front, and selNSGA2 keeps the population's size when
    they are more. `deadline` ends the run before a generation once the time is spent."""
    upper = [1] * genes if isinstance(genes, int) else [int(u) for u in genes]
    many = as_batch(evaluate).many
    history: list[GenerationStats] = []
    start, first = time.perf_counter(), []       # the initial population's values so far

    def objectives(keys):
        values = [(float(mem),) + tuple(float(fps.get(c, 0.0)) for c in cnns)
                  for mem, fps in many(keys)]
        if not history and progress and values:  # the initial population, slice by slice
            first.extend(values)
            progress(GenerationStats(0, settings.generations, len(first), len(first),
                                     time.perf_counter() - start, 0,
                                     int(min(v[0] for v in first)), stage))
        return values

    def step(run: Run, last: bool) -> None:
        stats = GenerationStats(run.generations, settings.generations, run.requests,
                                len(run.cache), run.seconds, len(run.hall),
                                int(min(ind.fitness.values[0] for ind in run.hall)), stage, last)
        history.append(stats)
        if progress:
            progress(stats)

    run = run_nsga2((-1.0,) + (1.0,) * len(cnns), layer_operators(upper, seeds or [], settings),
                    objectives, population_size(settings.population), settings.generations,
                    settings.seed, deadline, stage, step)
    if run.stopped and progress:            # the stage's closing line, as it stands
        progress(replace(history[-1], last=True))
    seconds = run.seconds
    return SearchResult(front=points(run.hall, cnns), evaluations=run.requests,
                        unique=len(run.cache), seconds=seconds, generations=len(history) - 1,
                        history=history, seen=set(run.cache), stopped=deadline.stopped,
                        stages=[StageTime(stage, seconds, len(run.cache))])

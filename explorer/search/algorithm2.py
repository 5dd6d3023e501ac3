"""Algorithm 2 on DEAP: NSGA-II over one integer gene per layer (explorer.plan.genes: an index
into the layer's ladder of rows per phase, 0 = whole; the paper's binary gene is the
two-rung ladder).

Fitness is (M, T_1, ..., T_N) with weights (-1, +1, ..., +1): memory minimised, every CNN's
fps maximised, as the paper's (M, -T_1, ..., -T_N) minimised. The loop follows DEAP's own
NSGA-II example: binary tournament on dominance and crowding (selTournamentDCD), two-point
crossover (tools.cxTwoPoint), one-gene mutation to another value of its range
(`mutate_one_gene`: a flip for binary genes), then selNSGA2 over parents + offspring. The
initial population holds the all-whole (reuse only) and all-row-by-row (everything by parts,
one row per phase) chromosomes, then the gene space's seeds (explorer.plan.genes.GeneSpace.seeds:
binary prefixes and uniform rungs for ladder genes, none for the paper's binary genes; the
toolbox's `seeds`); the others are uniform over each gene's range.

`evaluate(genes) -> (memory_bytes, {cnn: fps})` is injected (explorer.plan.derive builds it for an
application), and cached here by chromosome, since NSGA-II re-evaluates the same genes often.
Each generation's new chromosomes are evaluated as one batch, which explorer.search.parallel spreads
over worker processes (`search.workers`); the answers, and so the front, are the same.
DEAP's operators draw from the module `random`; it is seeded from the settings' seed for the
run and its previous state restored afterwards, so a seed gives the same front every time.
"""
from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Callable

from deap import base, creator, tools

from explorer.app.model import SearchSettings
from explorer.search.deadline import NONE, Deadline
from explorer.search.local_search import pareto_local_search
from explorer.search.path_relinking import relink
from explorer.search.parallel import Mapped, batch, evaluation_pool
from explorer.search.pick import Point, merge_fronts

Evaluate = Callable[[tuple[int, ...]], tuple[int, dict[str, float]]]
SLICE = 16        # initial-population chromosomes evaluated between time-limit checks
Progress = Callable[["GenerationStats"], None]


@dataclass
class GenerationStats:
    generation: int
    generations: int
    evaluations: int          # fitness requests so far (cache hits included)
    unique: int               # distinct chromosomes actually evaluated
    seconds: float
    front_size: int
    min_memory: int
    stage: str = "NSGA-II"    # binary NSGA-II / ladder NSGA-II (ladder_search) or NSGA-II
    last: bool = False        # the stage's last line (its last generation, or stopped on time)

    @property
    def rate(self) -> float:
        return self.evaluations / self.seconds if self.seconds > 0 else 0.0

    @property
    def left(self) -> float:
        """Seconds the stage still needs at its mean pace so far (generation 0 is the
        initial population, a generation's worth of evaluations)."""
        done = self.generation + 1
        return self.seconds / done * (self.generations - self.generation) if done else 0.0

    def line(self) -> str:
        return (f"{self.stage}: gen {self.generation:>3}/{self.generations}  front "
                f"{self.front_size:>3}  min memory {self.min_memory / 2**20:8.3f} MB  "
                f"evaluations {self.evaluations} ({self.unique} unique)  {self.rate:7.1f} eval/s"
                f"  {self.seconds:6.1f} s, ~{self.left:.0f} s left in this stage")


def stderr_progress(stats: GenerationStats) -> None:
    """On a terminal one line rewritten in place each generation (a new line per stage);
    elsewhere (a log, CI) one line per stage, when it ends."""
    if sys.stderr.isatty():
        print("\r" + stats.line(), end="\n" if stats.last else "", file=sys.stderr, flush=True)
    elif stats.last:
        print(stats.line(), file=sys.stderr, flush=True)


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
    seen: set[tuple[int, ...]] = field(default_factory=set, repr=False)   # chromosomes evaluated


def _fitness_class(n_cnns: int) -> type:
    """creator classes are global in DEAP; one per number of CNNs, made once."""
    name = f"FitnessMemFps{n_cnns}"
    if not hasattr(creator, name):
        creator.create(name, base.Fitness, weights=(-1.0,) + (1.0,) * n_cnns)
        creator.create(f"Chromosome{n_cnns}", list, fitness=getattr(creator, name))
    return getattr(creator, f"Chromosome{n_cnns}")


def flip_one_gene(individual: list[int]) -> tuple[list[int]]:
    """Single-gene mutation: flip one gene chosen at random."""
    i = random.randrange(len(individual))
    individual[i] = 1 - individual[i]
    return (individual,)


def mutate_one_gene(individual: list[int], upper: list[int]) -> tuple[list[int]]:
    """Single-gene mutation over integer ranges 0..upper[i]: one gene chosen at random takes
    another value of its range, uniformly (a flip for a binary gene, with the same draws as
    `flip_one_gene`)."""
    i = random.randrange(len(individual))
    top = upper[i]
    if top == 1:
        individual[i] = 1 - individual[i]
    elif top > 1:
        value = random.randrange(top)
        individual[i] = value + (value >= individual[i])
    return (individual,)


def clone(individual):
    """toolbox.clone for a chromosome (a list of ints and its fitness): the copy DEAP's
    default `copy.deepcopy` makes, without walking the object graph; it ran between
    generations, while the worker processes waited, 12k times per app-1 search."""
    twin = type(individual)(individual)
    twin.fitness.values = individual.fitness.values
    return twin


def random_genes(upper: list[int]) -> list[int]:
    """One value per gene, uniform over 0..upper[i]."""
    return [random.randint(0, top) for top in upper]


def two_point(ind1: list[int], ind2: list[int]) -> tuple[list[int], list[int]]:
    """tools.cxTwoPoint, which needs at least two genes."""
    return tools.cxTwoPoint(ind1, ind2) if len(ind1) > 1 else (ind1, ind2)


def _points(individuals, cnns: list[str]) -> list[Point]:
    """One point per distinct objective vector (the chromosome with fewest genes by parts
    wins among equals), sorted by memory, then fps (higher first)."""
    best: dict[tuple[float, ...], Point] = {}
    for ind in sorted(individuals, key=lambda i: (sum(i), tuple(i))):
        values = tuple(ind.fitness.values)
        if values not in best:
            mem, *fps = values
            best[values] = Point(tuple(ind), int(mem), dict(zip(cnns, fps)))
    return sorted(best.values(), key=lambda p: (p.memory_bytes, -sum(p.fps.values()), p.genes))


def nsga2(genes: int | list[int], cnns: list[str], evaluate: Evaluate, settings: SearchSettings,
          progress: Progress | None = None, seeds: list[tuple[int, ...]] | None = None,
          deadline: Deadline = NONE, stage: str = "NSGA-II") -> SearchResult:
    """Run NSGA-II over `genes` binary genes, or genes with values 0..genes[i]; returns every
    non-dominated point met during the run (DEAP ParetoFront, updated with every evaluated
    chromosome, offspring that selection drops included, so the front never loses a point).
    `seeds` (the toolbox's `seeds`): chromosomes put in the initial population after the
    all-whole and all-by-parts ones (other searches' fronts, explorer/tiling/search.py;
    explorer.plan.genes.GeneSpace.seeds for ladder genes); all of them are evaluated and enter
    the front, and selNSGA2 keeps the population's size when they are more. `deadline`
    (explorer/search/deadline.py) ends the run before a generation once the time is spent."""
    upper = [1] * genes if isinstance(genes, int) else [int(u) for u in genes]
    n_genes = len(upper)
    chromosome = _fitness_class(len(cnns))
    cache: dict[tuple[int, ...], tuple[float, ...]] = {}
    counts = {"requests": 0}

    many = batch(evaluate)

    def fitness(ind) -> tuple[float, ...]:
        counts["requests"] += 1
        return cache[tuple(ind)]

    def evaluate_all(individuals) -> None:
        """Fitness of every individual; the chromosomes not met before are evaluated in one
        batch (explorer.search.parallel: over worker processes when `evaluate` has them)."""
        new = list(dict.fromkeys(tuple(ind) for ind in individuals
                                 if tuple(ind) not in cache))
        for key, (mem, fps) in zip(new, many(new)):
            cache[key] = (float(mem),) + tuple(float(fps.get(c, 0.0)) for c in cnns)
        for ind in individuals:
            ind.fitness.values = toolbox.evaluate(ind)

    toolbox = base.Toolbox()
    if all(u == 1 for u in upper):          # the paper's binary chromosome
        toolbox.register("gene", random.randint, 0, 1)
        toolbox.register("individual", tools.initRepeat, chromosome, toolbox.gene, n_genes)
        toolbox.register("mutate", flip_one_gene)
    else:
        toolbox.register("individual", tools.initIterate, chromosome,
                         lambda: random_genes(upper))
        toolbox.register("mutate", mutate_one_gene, upper=upper)
    toolbox.register("seeds", lambda: [chromosome([int(g) for g in s]) for s in seeds or ()])
    toolbox.register("evaluate", fitness)
    toolbox.register("clone", clone)
    toolbox.register("mate", two_point)
    toolbox.register("select", tools.selNSGA2)

    mu = max(4, -(-settings.population // 4) * 4)     # selTournamentDCD wants a multiple of 4
    state = random.getstate()
    random.seed(settings.seed)
    start = time.perf_counter()
    history: list[GenerationStats] = []
    hall = tools.ParetoFront()
    try:
        pop = [chromosome([0] * n_genes), chromosome(list(upper))]
        known = {tuple(ind) for ind in pop}
        for seed in toolbox.seeds():
            if len(seed) != n_genes:
                raise ValueError(f"seed chromosome has {len(seed)} genes, expected {n_genes}")
            if tuple(seed) not in known:
                known.add(tuple(seed))
                pop.append(seed)
        pop += [toolbox.individual() for _ in range(mu - len(pop))]
        if deadline.seconds is None:
            evaluate_all(pop)
        else:                   # a large seeded population is a long batch: slices, on time
            done: list = []
            for i in range(0, len(pop), SLICE):
                evaluate_all(pop[i:i + SLICE])
                done += pop[i:i + SLICE]
                if deadline.over(f"{stage} initial population"):
                    break
            pop = done
        hall.update(pop)
        pop = toolbox.select(pop, mu)              # assigns the crowding distances

        def report(gen: int, last: bool = False) -> None:
            stats = GenerationStats(gen, settings.generations, counts["requests"], len(cache),
                                    time.perf_counter() - start, len(hall),
                                    int(min(ind.fitness.values[0] for ind in hall)), stage,
                                    last or gen >= settings.generations)
            history.append(stats)
            if progress:
                progress(stats)

        report(0)
        for gen in range(1, settings.generations + 1):
            if deadline.over(f"{stage} generation {gen}"):
                if progress:        # the stage's closing line, as it stands
                    progress(replace(history[-1], last=True))
                break
            offspring = [toolbox.clone(ind) for ind in tools.selTournamentDCD(pop, len(pop))]
            for ind1, ind2 in zip(offspring[::2], offspring[1::2]):
                if random.random() <= settings.crossover:
                    toolbox.mate(ind1, ind2)
                    del ind1.fitness.values, ind2.fitness.values
                for ind in (ind1, ind2):
                    if random.random() <= settings.mutation:
                        toolbox.mutate(ind)
                        del ind.fitness.values
            evaluate_all([ind for ind in offspring if not ind.fitness.valid])
            hall.update(offspring)                 # every evaluated point, kept or not
            pop = toolbox.select(pop + offspring, mu)
            report(gen)
    finally:
        random.setstate(state)
    return SearchResult(front=_points(hall, cnns), evaluations=counts["requests"],
                        unique=len(cache), seconds=time.perf_counter() - start,
                        generations=len(history) - 1, history=history, seen=set(cache),
                        stopped=deadline.stopped)


@dataclass
class Outcome:
    """Algorithm 2's answer: the front, the chosen point (lines 9-16) and how it was found."""
    front: list[Point]
    chosen: Point
    met: bool
    result: SearchResult
    genes: list[str]                      # gene labels "cnn.layer", in gene order
    rule: str = "memory"                  # the rule that chose (explorer.search.pick.pick_rule)


def ladder_search(space, cnns: list[str], evaluate: Evaluate, settings: SearchSettings,
                  progress: Progress | None = None,
                  extra: list[tuple[int, ...]] | None = None,
                  deadline: Deadline = NONE) -> SearchResult:
    """NSGA-II over ladder genes that starts from the paper's search: first the binary
    search itself (Eq. 6 genes, the same settings and seed, each binary chromosome
    evaluated as its ladder twin, `space.binary`), then the ladder search seeded with that
    front and `space.seeds()`. Every point of the binary front is a ladder chromosome, so
    the least memory found is never worse than the binary genes'. The two runs' fronts
    are merged and filled in by `settings.relink_rounds` rounds of path relinking
    (explorer/search/path_relinking.py: steps between neighbouring front points), then
    `settings.local_rounds` rounds of Pareto local search (explorer/search/local_search.py: one
    by-parts layer one rung toward whole), then path relinking once more (up to
    `relink_rounds` rounds: the pairs the local search made); evaluations, distinct
    chromosomes and time are the sum of the stages."""
    first = nsga2(len(space.upper), cnns, Mapped(evaluate, space.binary), settings, progress,
                  deadline=deadline.share(0.4), stage="binary NSGA-II")
    seeds = list(dict.fromkeys([space.binary(p.genes) for p in first.front] + space.seeds()
                               + [tuple(int(g) for g in e) for e in extra or ()]))
    if deadline.over("ladder NSGA-II"):      # the binary front is the answer so far
        second = SearchResult(front=[], history=first.history)
    else:
        second = nsga2(space.upper, cnns, evaluate, settings, progress, seeds=seeds,
                       deadline=deadline.share(0.75), stage="ladder NSGA-II")
    start, seen = time.perf_counter(), set(second.seen)
    # the binary run's points as the ladder chromosomes they were evaluated as
    twins = [Point(space.binary(p.genes), p.memory_bytes, p.fps) for p in first.front]
    front = merge_fronts(second.front, twins)
    relinked = searched = 0
    cap = settings.stage_evaluations          # explorer/search/effort.py; None = no cap
    if not deadline.over("path relinking"):
        front, relinked = relink(front, cnns, evaluate, settings.relink_rounds, seen, deadline, cap)
    if not deadline.over("local search"):
        front, searched = pareto_local_search(front, cnns, evaluate, settings.local_rounds, seen,
                                              deadline, cap)
    if not deadline.over("path relinking"):
        # the points local search added have neighbours on the front never relinked with them
        front, again = relink(front, cnns, evaluate, settings.relink_rounds, seen, deadline,
                              None if cap is None else max(0, cap - relinked))
        searched += again
    return SearchResult(front=front,
                        evaluations=first.evaluations + second.evaluations + relinked + searched,
                        unique=first.unique + second.unique + relinked + searched,
                        seconds=first.seconds + second.seconds + time.perf_counter() - start,
                        generations=max(first.generations, second.generations),
                        history=second.history, stopped=deadline.stopped)
    # (a share that ran out marks `deadline.stopped` too: the search did not do all it
    # planned, although relinking may have used the rest of the time)


def _spread(evaluate: Evaluate, settings: SearchSettings):
    """Where the evaluations run: a Dask cluster (explorer/search/cluster.py) when the settings
    name one, else the local pool of `workers` processes (explorer/search/parallel.py)."""
    if settings.cluster:
        from explorer.search.cluster import cluster_pool
        return cluster_pool(evaluate, settings.cluster)
    return evaluation_pool(evaluate, settings.workers)


def algorithm2(app, evaluate: Evaluate, settings: SearchSettings | None = None,
               progress: Progress | None = None,
               seeds: list[tuple[int, ...]] | None = None, seeded: bool = True) -> Outcome:
    """Algorithm 2 as published: early exit when reuse alone (every layer one phase) meets
    M^c; otherwise NSGA-II over one gene per layer that may go by parts; then the pick.
    `evaluate` is explorer.plan.derive.Evaluation (memory by Algorithm 1, fps by an evaluator);
    its `space` (explorer.plan.genes) gives the genes' ranges, binary without one; `seeds` go to
    nsga2's initial population. Ladder genes run `ladder_search` (the binary search first,
    its front and the space's seeds in the ladder population, `seeds` after them);
    `seeded=False` runs the plain NSGA-II on them instead."""
    from explorer.plan.derive import gene_labels
    from explorer.search.pick import pick, pick_rule, search_needed

    settings = settings or app.search
    deadline = Deadline(settings.time_limit)
    space = getattr(evaluate, "space", None)
    labels = space.labels if space is not None else gene_labels(app)
    upper = space.upper if space is not None else [1] * len(labels)
    cnns = list(app.cnns)
    start = time.perf_counter()
    zeros = (0,) * len(labels)
    mem, fps = evaluate(zeros)
    reuse = Point(zeros, int(mem), {c: float(fps.get(c, 0.0)) for c in cnns})
    if not labels or not search_needed(reuse, app.memory, app.fps, getattr(app, "prefer", None)):
        result = SearchResult([reuse], evaluations=1, unique=1,
                              seconds=time.perf_counter() - start, early_exit=True)
    else:
        with _spread(evaluate, settings) as spread:
            if seeded and getattr(space, "granularity", "binary") == "ladder" and \
                    hasattr(space, "binary") and any(u > 1 for u in upper):
                result = ladder_search(space, cnns, spread, settings, progress, seeds, deadline)
            else:
                result = nsga2(upper, cnns, spread, settings, progress, seeds, deadline)
    prefer = getattr(app, "prefer", None)
    chosen, met = pick(result.front, app.memory, app.fps, prefer)
    return Outcome(result.front, chosen, met, result, labels,
                   pick_rule(app.memory, app.fps, prefer))

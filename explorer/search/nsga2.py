"""The one NSGA-II loop of the tree (DEAP), for every search over integer genes: Algorithm 2's
(explorer/search/algorithm2.py) and the primitive GA (explorer/primitives/ga.py).

The loop follows DEAP's own NSGA-II example: binary tournament on dominance and crowding
(selTournamentDCD), the operators' variation of the tournament's copies, evaluation of the
changed chromosomes as one batch, then selNSGA2 over parents + offspring. What differs
between searches is given, pymoo-style, as `Operators`: the initial population, the
variation (crossover and mutation with their probabilities) and which chromosomes the
archive (DEAP's ParetoFront) sees: every one evaluated, or the survivors of each selection.

Objectives come from `objectives(keys)`, one batch of distinct new chromosomes per step,
cached here by chromosome (NSGA-II meets the same genes often); `weights` are DEAP's
(-1 minimised, +1 maximised). DEAP's operators draw from the module `random`; it is seeded
from `seed` for the run and its previous state restored afterwards, so a seed gives the
same front every time. `deadline` (explorer/search/deadline.py) ends the run before a
generation once the time is spent, and every batch (the initial population, a generation's
offspring) is evaluated in slices with the deadline asked between them: a generation the
deadline stops selects among the parents and the offspring evaluated.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from deap import base, creator, tools

from explorer.search.deadline import NONE, Deadline
from explorer.search.problem import Key

Objectives = Callable[[Sequence[Key]], list[tuple[float, ...]]]
SLICE = 32        # most chromosomes of a batch evaluated between time-limit checks


@dataclass(frozen=True)
class Operators:
    """How a run makes and changes chromosomes. `initial(mu, make)`: the initial population
    (`make(genes)` builds a chromosome; draws from `random` come after the seed); `vary
    (offspring)`: crossover and mutation in place, deleting the fitness of every chromosome
    it changes; `archive_survivors`: the front sees the population after each selection
    rather than every chromosome evaluated."""
    initial: Callable[[int, Callable[[list[int]], list]], list]
    vary: Callable[[list], None]
    archive_survivors: bool = False


@dataclass
class Run:
    """A run's state: the archive, the cache of objectives, the fitness requests (cache
    hits included) and the generations done; `stopped` when the deadline ended it."""
    hall: tools.ParetoFront
    cache: dict[Key, tuple[float, ...]] = field(default_factory=dict)
    requests: int = 0
    generations: int = 0
    start: float = field(default_factory=time.perf_counter)
    stopped: bool = False

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start


Step = Callable[[Run, bool], None]       # after each generation (0: the initial population);
                                         # True on the run's last line


def chromosome_class(weights: tuple[float, ...]) -> type:
    """A list of ints with a fitness of `weights`; creator classes are global in DEAP, made
    once per weights."""
    tag = "".join("m" if w < 0 else "p" for w in weights)
    name = f"Fitness_{tag}"
    if not hasattr(creator, name):
        creator.create(name, base.Fitness, weights=tuple(weights))
        creator.create(f"Chromosome_{tag}", list, fitness=getattr(creator, name))
    return getattr(creator, f"Chromosome_{tag}")


def clone(individual):
    """A chromosome's copy with its fitness: what DEAP's default `copy.deepcopy` makes,
    without walking the object graph (it ran 12k times per app-1 search while the worker
    processes waited)."""
    twin = type(individual)(individual)
    twin.fitness.values = individual.fitness.values
    return twin


def evaluate_all(run: Run, individuals: list, objectives: Objectives,
                 deadline: Deadline = NONE, stage: str = "NSGA-II") -> bool:
    """Fitness of every individual; chromosomes not met before are evaluated as one batch,
    in slices with the deadline asked between them (Deadline.in_slices). True when every
    individual has its fitness, False when the deadline stopped the batch (those left have
    none)."""
    new = list(dict.fromkeys(tuple(ind) for ind in individuals if tuple(ind) not in run.cache))
    answers = deadline.in_slices(objectives, new, stage, SLICE)
    for key, values in zip(new, answers):
        run.cache[key] = values
    for ind in individuals:
        values = run.cache.get(tuple(ind))
        if values is not None:
            run.requests += 1
            ind.fitness.values = values
    return len(answers) == len(new)


def initial_population(run: Run, pop: list, objectives: Objectives, deadline: Deadline,
                       stage: str) -> list:
    """The initial population evaluated (in slices with a deadline: a large seeded
    population is a long batch); the part evaluated when the deadline stops it."""
    if evaluate_all(run, pop, objectives, deadline, f"{stage} initial population"):
        return pop
    return [ind for ind in pop if ind.fitness.valid]


def generation(run: Run, pop: list, mu: int, objectives: Objectives, ops: Operators,
               deadline: Deadline = NONE, stage: str = "NSGA-II") -> tuple[list, bool]:
    """One generation: tournament, variation, evaluation, archive, selection; (the
    population, whether every offspring was evaluated). When the deadline stops the
    evaluation, the selection is over the parents and the offspring evaluated."""
    offspring = [clone(ind) for ind in tools.selTournamentDCD(pop, len(pop))]
    ops.vary(offspring)
    complete = evaluate_all(run, [ind for ind in offspring if not ind.fitness.valid],
                            objectives, deadline, stage)
    if not complete:
        offspring = [ind for ind in offspring if ind.fitness.valid]
    if not ops.archive_survivors:
        run.hall.update(offspring)                 # every evaluated point, kept or not
    pop = tools.selNSGA2(pop + offspring, mu)
    if ops.archive_survivors:
        run.hall.update(pop)
    return pop, complete


def run_nsga2(weights: tuple[float, ...], ops: Operators, objectives: Objectives, mu: int,
              generations: int, seed: int, deadline: Deadline = NONE, stage: str = "NSGA-II",
              step: Step | None = None) -> Run:
    """NSGA-II for `generations` generations with a population of `mu` (module doc)."""
    make = chromosome_class(weights)
    state = random.getstate()
    random.seed(seed)
    run = Run(tools.ParetoFront())
    try:
        pop = initial_population(run, ops.initial(mu, make), objectives, deadline, stage)
        if not ops.archive_survivors:
            run.hall.update(pop)
        pop = tools.selNSGA2(pop, mu)              # assigns the crowding distances
        if ops.archive_survivors:
            run.hall.update(pop)
        if step:
            step(run, generations == 0)
        for gen in range(1, generations + 1):
            if deadline.over(f"{stage} generation {gen}"):
                run.stopped = True
                break
            pop, complete = generation(run, pop, mu, objectives, ops, deadline,
                                       f"{stage} generation {gen}")
            run.generations = gen
            if not complete:
                run.stopped = True
            if step:
                step(run, gen == generations or not complete)
            if not complete:
                break
    finally:
        random.setstate(state)
    return run


def population_size(population: int) -> int:
    """selTournamentDCD wants a multiple of 4."""
    return max(4, -(-population // 4) * 4)

"""NSGA-II (DEAP) on TASO's cost model, to measure how close memtrade's kind of search gets
to the exact front the ILP gives (explorer/primitives/ilp.py): one integer gene per layer (its
primitive), objectives (time, memory) both minimised, DEAP's NSGA-II loop as in
explorer/search/algorithm2.py (selTournamentDCD, two-point crossover, uniform-integer mutation,
selNSGA2). The hypervolume ratio HV(GA) / HV(ILP) (moocore's hypervolume, the one DEAP's
indicator uses) is the score: 1 means
the GA found the exact front; the ILP's is the ground truth, so the ratio is at most 1.
"""
from __future__ import annotations

import random

import moocore
from deap import base, creator, tools

from explorer.primitives.costs import CostModel

if not hasattr(creator, "TasoFitness"):
    creator.create("TasoFitness", base.Fitness, weights=(-1.0, -1.0))
    creator.create("TasoChoice", list, fitness=creator.TasoFitness)


def nsga2(costs: CostModel, strategy: str = "sum", population: int = 64, generations: int = 100,
          seed: int = 0, crossover: float = 0.9) -> list[tuple[tuple[int, ...], float, int]]:
    """The GA's non-dominated (choice, time_ms, memory_bytes), sorted by memory."""
    sizes = [len(o) for o in costs.options]
    cache: dict[tuple[int, ...], tuple[float, float]] = {}

    def fitness(ind):
        key = tuple(ind)
        if key not in cache:
            ev = costs.evaluate(key)
            cache[key] = (ev.time_ms, float(ev.memory[strategy]))
        return cache[key]

    def mutate(ind):
        i = random.randrange(len(ind))
        ind[i] = random.randrange(sizes[i])
        return (ind,)

    toolbox = base.Toolbox()
    toolbox.register("individual", lambda: creator.TasoChoice(random.randrange(s) for s in sizes))
    mu = max(4, -(-population // 4) * 4)
    state = random.getstate()
    random.seed(seed)
    hall = tools.ParetoFront()
    try:
        pop = [toolbox.individual() for _ in range(mu)]
        for ind in pop:
            ind.fitness.values = fitness(ind)
        pop = tools.selNSGA2(pop, mu)
        hall.update(pop)
        for _ in range(generations):
            off = [toolbox.clone(i) for i in tools.selTournamentDCD(pop, len(pop))]
            for a, b in zip(off[::2], off[1::2]):
                if len(a) > 1 and random.random() <= crossover:
                    tools.cxTwoPoint(a, b)
                mutate(a)
                mutate(b)
                del a.fitness.values, b.fitness.values
            for ind in off:
                ind.fitness.values = fitness(ind)
            pop = tools.selNSGA2(pop + off, mu)
            hall.update(pop)
    finally:
        random.setstate(state)
    best = {}
    for ind in hall:
        t, m = ind.fitness.values
        best.setdefault((t, m), (tuple(ind), t, int(m)))
    return sorted(best.values(), key=lambda r: (r[2], r[1]))


def hypervolume(points: list[tuple[float, float]], ref: tuple[float, float]) -> float:
    """Area dominated by `points` (both objectives minimised) up to `ref`."""
    inside = [p for p in points if p[0] < ref[0] and p[1] < ref[1]]
    return float(moocore.hypervolume(inside, ref=list(ref))) if inside else 0.0


def hv_ratio(ga: list[tuple[float, float]], ilp: list[tuple[float, float]]) -> float:
    """HV(GA) / HV(ILP) with the reference point 10% beyond the worst of both fronts."""
    both = ga + ilp
    ref = (max(p[0] for p in both) * 1.1, max(p[1] for p in both) * 1.1)
    exact = hypervolume(ilp, ref)
    return hypervolume(ga, ref) / exact if exact else 1.0

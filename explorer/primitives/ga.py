"""NSGA-II (DEAP) on TASO's cost model, to measure how close memtrade's kind of search gets
to the exact front the ILP gives (explorer/primitives/ilp.py): one integer gene per layer (its
primitive), objectives (time, memory) both minimised, run by the NSGA-II loop of
explorer/search/nsga2.py with this GA's operators: a uniform random initial population;
two-point crossover with probability `crossover`, then one gene of each child set to a
uniform value of its range; the archive sees the population after each selection. The
hypervolume ratio HV(GA) / HV(ILP) (moocore's hypervolume, the one DEAP's indicator uses) is
the score: 1 means the GA found the exact front; the ILP's is the ground truth, so the ratio
is at most 1.
"""
from __future__ import annotations

import random

import moocore
from deap import tools

from explorer.primitives.costs import CostModel
from explorer.search.nsga2 import Operators, population_size, run_nsga2


def taso_operators(sizes: list[int], crossover: float) -> Operators:
    """The GA's initial population and variation (module doc)."""
    def initial(mu: int, make) -> list:
        return [make([random.randrange(s) for s in sizes]) for _ in range(mu)]

    def mutate(ind) -> None:
        i = random.randrange(len(ind))
        ind[i] = random.randrange(sizes[i])

    def vary(offspring: list) -> None:
        for a, b in zip(offspring[::2], offspring[1::2]):
            if len(a) > 1 and random.random() <= crossover:
                tools.cxTwoPoint(a, b)
            mutate(a)
            mutate(b)
            del a.fitness.values, b.fitness.values

    return Operators(initial, vary, archive_survivors=True)


def nsga2(costs: CostModel, strategy: str = "sum", population: int = 64, generations: int = 100,
          seed: int = 0, crossover: float = 0.9) -> list[tuple[tuple[int, ...], float, int]]:
    """The GA's non-dominated (choice, time_ms, memory_bytes), sorted by memory."""
    sizes = [len(o) for o in costs.options]

    def objectives(keys):
        out = []
        for key in keys:
            ev = costs.evaluate(key)
            out.append((ev.time_ms, float(ev.memory[strategy])))
        return out

    run = run_nsga2((-1.0, -1.0), taso_operators(sizes, crossover), objectives,
                    population_size(population), generations, seed)
    best = {}
    for ind in run.hall:
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

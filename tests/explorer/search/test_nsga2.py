"""The one NSGA-II loop (explorer/search/nsga2.py): its archive, its seed, its deadline."""
from __future__ import annotations

import random

from explorer.search.deadline import Deadline
from explorer.search.nsga2 import Operators, population_size, run_nsga2


def objectives(keys):
    """Two objectives, both minimised, in conflict: x and (4 - x) + y."""
    return [(float(x), float(4 - x + y)) for x, y in keys]


def ops(archive_survivors: bool) -> Operators:
    def initial(mu, make):
        return [make([random.randint(0, 4), random.randint(0, 4)]) for _ in range(mu)]

    def vary(offspring):
        for ind in offspring:
            ind[random.randrange(2)] = random.randint(0, 4)
            del ind.fitness.values

    return Operators(initial, vary, archive_survivors)


def non_dominated(values):
    return {v for v in values
            if not any(w[0] <= v[0] and w[1] <= v[1] and w != v for w in values)}


def test_the_archive_holds_every_non_dominated_chromosome_evaluated():
    run = run_nsga2((-1.0, -1.0), ops(False), objectives, 8, 6, seed=5)
    assert {tuple(ind.fitness.values) for ind in run.hall} == non_dominated(set(run.cache.values()))
    assert run.generations == 6 and run.requests >= len(run.cache)


def test_survivors_archive_is_within_the_evaluated_front():
    run = run_nsga2((-1.0, -1.0), ops(True), objectives, 8, 6, seed=5)
    front = non_dominated(set(run.cache.values()))
    archived = {tuple(ind.fitness.values) for ind in run.hall}
    assert archived and all(any(f[0] <= a[0] and f[1] <= a[1] for f in front) for a in archived)


def test_a_seed_gives_the_same_run_and_leaves_random_as_it_was():
    random.seed(11)
    before = random.getstate()
    a = run_nsga2((-1.0, -1.0), ops(False), objectives, 8, 4, seed=2)
    assert random.getstate() == before
    b = run_nsga2((-1.0, -1.0), ops(False), objectives, 8, 4, seed=2)
    assert [tuple(i) for i in a.hall] == [tuple(i) for i in b.hall] and a.cache == b.cache


def test_a_spent_deadline_stops_before_the_first_generation():
    asked = []

    def counting(keys):
        asked.extend(keys)
        return objectives(keys)

    run = run_nsga2((-1.0, -1.0), ops(False), counting, 8, 10, seed=1, deadline=Deadline(0.0))
    assert run.stopped and run.generations == 0
    assert len(asked) <= 16              # the initial population's first slice, no more


def test_population_is_a_multiple_of_four():
    assert [population_size(p) for p in (1, 4, 5, 72, 101)] == [4, 4, 8, 72, 104]

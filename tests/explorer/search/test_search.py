"""NSGA-II loop (explorer.search.algorithm2) on toy fitness functions with a known optimum."""
import itertools

from explorer.app.model import SearchSettings
from explorer.search.algorithm2 import nsga2

WEIGHTS = [9, 4, 7, 1, 6, 3, 8, 2]          # memory saved by each gene set to 1
COSTS = [1, 5, 2, 6, 3, 4, 1, 5]            # fps lost by each gene set to 1


def toy(genes):
    mem = 100 - sum(w for w, g in zip(WEIGHTS, genes) if g)
    fps = 50.0 - sum(c for c, g in zip(COSTS, genes) if g)
    return mem, {"net": fps}


def true_front():
    """Exhaustive Pareto front of the toy problem, as (memory, fps) pairs."""
    pts = {tuple([m, f["net"]]) for m, f in map(toy, itertools.product((0, 1), repeat=8))}
    return {p for p in pts if not any(q[0] <= p[0] and q[1] >= p[1] and q != p for q in pts)}


def run(seed=3, population=24, generations=15, fitness=toy):
    return nsga2(len(WEIGHTS), ["net"], fitness,
                 SearchSettings(population=population, generations=generations, seed=seed))


def test_same_seed_same_front_and_global_random_untouched():
    import random
    random.seed(99)
    before = random.random()
    random.seed(99)
    a, b = run(), run()
    assert random.random() == before
    assert [(p.genes, p.memory_bytes, p.fps) for p in a.front] == \
           [(p.genes, p.memory_bytes, p.fps) for p in b.front]
    other = run(seed=4)
    assert a.evaluations == b.evaluations and a.unique == b.unique
    assert (a.unique, [p.genes for p in a.front]) != (other.unique, [p.genes for p in other.front])


def test_front_is_non_dominated_and_finds_the_true_front():
    res = run(population=40, generations=30)
    found = {(p.memory_bytes, p.fps["net"]) for p in res.front}
    assert found <= true_front()
    assert found == true_front()            # 256 chromosomes: NSGA-II covers it all
    mems = [p.memory_bytes for p in res.front]
    assert mems == sorted(mems)


def test_seeds_all_zeros_and_all_ones_and_caches():
    seen = []

    def counting(genes):
        seen.append(genes)
        return toy(genes)

    res = run(population=8, generations=5, fitness=counting)
    assert seen[0] == (0,) * 8 and seen[1] == (1,) * 8
    assert len(seen) == len(set(seen)) == res.unique       # each chromosome evaluated once
    assert res.evaluations >= res.unique
    assert min(p.memory_bytes for p in res.front) == 100 - sum(WEIGHTS)  # all-ones is kept
    assert len(res.history) == 6 and res.history[-1].generation == 5


def test_two_objectives_per_cnn_and_single_gene():
    res = nsga2(1, ["a", "b"], lambda g: (10 - 5 * g[0], {"a": 9.0 - g[0], "b": 3.0}),
                SearchSettings(population=4, generations=3, seed=1))
    assert {(p.genes, p.memory_bytes) for p in res.front} == {((0,), 10), ((1,), 5)}
    assert all(p.fps["b"] == 3.0 for p in res.front)

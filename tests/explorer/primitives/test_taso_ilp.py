"""explorer/primitives/ilp.py against brute force: on seeded random cost models (layouts mixed, so
the linearised transition terms matter) the swept front is exactly the Pareto front of all
choices, for both memory strategies; each solution's objective is the cost model's own
evaluation; the paper's greedy follows its rule; the GA never beats the exact front."""
from __future__ import annotations

import itertools
import random

import pytest

from explorer.primitives import ga as taso_ga, ilp as taso_ilp
from explorer.primitives.costs import CostModel, Edge, Option, from_profile
from sdf3.errors import InputError


def random_model(seed: int, n: int = 7, scale: int = 1000) -> CostModel:
    rng = random.Random(seed)
    options = [[Option(f"p{j}", rng.uniform(0.1, 2.0), rng.randint(0, 5) * scale,
                       rng.randint(0, 20) * scale, rng.choice(["nchw", "nchwc"]))
                for j in range(rng.randint(1, 4))] for _ in range(n)]
    edges = [Edge(i, i + 1, rng.uniform(0, 0.5), rng.uniform(0, 0.5), rng.randint(0, 3) * 1000,
                  rng.randint(0, 3) * 1000) for i in range(n - 1)]
    edges.append(Edge(0, n - 1, 0.3, 0.2, 500, 700))           # a skip connection
    return CostModel(["c"], [("c", f"l{i}") for i in range(n)], options, edges, 12345)


def brute_front(m: CostModel, strategy: str) -> list[tuple[float, int]]:
    pts = set()
    for choice in itertools.product(*[range(len(o)) for o in m.options]):
        ev = m.evaluate(choice)
        pts.add((round(ev.time_ms, 9), ev.memory[strategy]))
    return sorted(p for p in pts if not any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in pts))


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("strategy", ["sum", "workspace"])
def test_swept_front_is_the_exact_pareto_front(seed, strategy):
    m = random_model(seed)
    front = taso_ilp.front(m, strategy)
    got = sorted((round(p.time_ms, 9), p.memory_bytes) for p in front.points)
    assert front.complete and got == brute_front(m, strategy)


@pytest.mark.parametrize("seed", [7, 8])
@pytest.mark.parametrize("strategy", ["sum", "workspace"])
def test_front_exact_with_megabyte_workspaces(strategy, seed):
    """Workspaces of MBs: the solver's default integrality tolerance (1e-6 of x) would be
    bytes of slack, enough to return the same point under a budget 1 byte below it."""
    m = random_model(seed, scale=1_048_573)
    front = taso_ilp.front(m, strategy)
    got = sorted((round(p.time_ms, 9), p.memory_bytes) for p in front.points)
    assert front.complete and got == brute_front(m, strategy)


def test_objective_equals_the_cost_model_evaluation():
    m = random_model(4)
    for strategy in ("sum", "workspace"):
        sol = taso_ilp.solve(m, "time", strategy)
        assert sol.objective == pytest.approx(m.evaluate(sol.choice).time_ms, abs=1e-9)
        sol = taso_ilp.solve(m, "memory", strategy)
        assert sol.objective == pytest.approx(m.evaluate(sol.choice).memory[strategy], abs=1e-6)


def test_budgets_bind():
    m = random_model(5)
    fast = taso_ilp.solve(m, "time")
    budget = m.evaluate(fast.choice).memory["sum"] - 1
    under = taso_ilp.solve(m, "time", memory_budget=budget)
    assert m.evaluate(under.choice).memory["sum"] <= budget
    assert taso_ilp.solve(m, "time", memory_budget=0).choice is None
    limit = m.evaluate(fast.choice).time_ms * 1.5
    low = taso_ilp.solve(m, "memory", time_budget=limit)
    assert m.evaluate(low.choice).time_ms <= limit + 1e-9


def test_greedy_follows_the_papers_rule():
    """Layer a: fast (1 ms, 100 B) or small (5 ms, 10 B); layer b: fast (1 ms, 60 B), mid
    (2 ms, 30 B) or small (9 ms, 5 B). Greedy starts from (fast, fast) and, over budget, moves
    the layer with the largest footprint to its fastest smaller primitive. At 130 B it shrinks
    a first (6 ms); the ILP keeps a fast and takes b's mid (3 ms)."""
    a = [Option("fast", 1.0, 100, 0, "nchw"), Option("small", 5.0, 10, 0, "nchw")]
    b = [Option("fast", 1.0, 60, 0, "nchw"), Option("mid", 2.0, 30, 0, "nchw"),
         Option("small", 9.0, 5, 0, "nchw")]
    m = CostModel(["c"], [("c", "a"), ("c", "b")], [a, b], [Edge(0, 1)], 0)
    assert taso_ilp.greedy(m, None) == (0, 0)
    assert taso_ilp.greedy(m, 95) == (1, 0)
    # 40 B: a small (10) + b must shrink: largest is b fast 60 -> fastest smaller: mid (30)
    assert taso_ilp.greedy(m, 40) == (1, 1)
    assert taso_ilp.greedy(m, 14) is None
    assert taso_ilp.greedy(m, 40, start=(0, 1)) == (1, 1)     # the paper's: from a given start
    # with 130 B the greedy keeps a fast and b's 60 B does not fit: a goes small first
    assert taso_ilp.greedy(m, 130) == (1, 0)          # 6 ms
    ilp = taso_ilp.solve(m, "time", memory_budget=130)
    assert ilp.choice == (0, 1)                        # 3 ms: 2x faster than greedy


def test_ga_never_beats_the_exact_front():
    m = random_model(6, n=9)
    exact = [(p.time_ms, p.memory_bytes) for p in taso_ilp.front(m).points]
    ga = taso_ga.nsga2(m, population=16, generations=10, seed=1)
    ratio = taso_ga.hv_ratio([(t, mm) for _, t, mm in ga], exact)
    assert 0 < ratio <= 1 + 1e-9
    assert taso_ga.nsga2(m, population=16, generations=10, seed=1) == ga     # seeded


def test_profile_table_errors_name_the_key(tmp_path):
    from csdf.model import CNN, Layer
    import networkx as nx

    g = nx.DiGraph()
    g.add_node("x", layer=Layer("x", "Input", output_shape=(1, 1, 2, 2)))
    app = type("App", (), {"cnns": {"c": CNN("c", g)}})()
    with pytest.raises(InputError, match="no entry for CNN 'c'"):
        from_profile(app, {}, 0, "p.yaml")
    with pytest.raises(InputError, match=r"p.yaml: primitives.c.layers.x.ort_nchw.ms: expected a number"):
        from_profile(app, {"c": {"layers": {"x": {"ort_nchw": {"ms": "fast", "layout": "nchw",
                                                                "weight_bytes": 0, "workspace_bytes": 0}}}}},
                     0, "p.yaml")

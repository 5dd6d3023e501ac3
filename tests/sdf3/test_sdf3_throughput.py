"""Self-timed throughput: processors shared through static orders, capacities as reverse
channels, pipelines of two partitions on two processors. Expected values are computed here
from the graphs' cycles (the maximum cycle mean), independently of the simulation."""
from __future__ import annotations

import math

import pytest

from sdf3.graph import Actor, Channel, Graph
from sdf3.notation import compact, expand
from sdf3.schedule import min_buffer_schedule
from sdf3.throughput import orders_by_processor, throughput


def pipeline() -> Graph:
    """a -> b on processor 0, c -> d on processor 1, b -> c crosses."""
    g = Graph("pipe")
    for name, t, proc in [("a", 3, "p0"), ("b", 5, "p0"), ("c", 4, "p1"), ("d", 2, "p1")]:
        g.add_actor(Actor(name, 1, [t], name, proc))
    g.add_channel(Channel("ab", "a", "b", [1], [1]))
    g.add_channel(Channel("bc", "b", "c", [1], [1]))
    g.add_channel(Channel("cd", "c", "d", [1], [1]))
    return g


ORDERS = {"p0": ["a", "b"], "p1": ["c", "d"]}


def test_two_partitions_pipelined_on_two_processors():
    g = pipeline()
    # unbounded crossing buffer: the slower processor sets the pace, 3 + 5 = 8
    assert throughput(g, orders=ORDERS) == pytest.approx(1 / 8)
    # a crossing buffer of one token: b claims room at its start, c frees it at its end,
    # so the cycle b -> c -> b takes 5 + 4 = 9 per token
    assert throughput(g, {"bc": 1}, ORDERS) == pytest.approx(1 / 9)
    # two tokens (double buffering) restore the processors' pace
    assert throughput(g, {"bc": 2}, ORDERS) == pytest.approx(1 / 8)
    # everything on one processor: one iteration takes the sum of all times
    assert throughput(g, orders={"p0": ["a", "b", "c", "d"]}) == pytest.approx(1 / 14)
    # the same orders derived from one schedule and the actors' processors
    orders = orders_by_processor(g, ["a", "c", "b", "d"])
    assert [[a for a, _ in o] for o in orders.values()] == [["a", "b"], ["c", "d"]]
    assert throughput(g, {"bc": 1}, orders) == pytest.approx(1 / 9)


def test_single_processor_static_order_of_csdf_schedule():
    g = Graph("w")
    g.add_actor(Actor("p", 4, [1, 2, 1, 2]))
    g.add_actor(Actor("c", 2, [3, 5]))
    g.add_channel(Channel("pc", "p", "c", [1, 1, 1, 1], [3, 1]))
    sched = min_buffer_schedule(g)
    # one processor, the schedule's order, its own buffers: the iteration is sequential
    thr = throughput(g, sched.buffers, {"p0": sched})
    assert thr == pytest.approx(1 / (1 + 2 + 1 + 2 + 3 + 5))


def test_unbounded_and_deadlocked_components():
    g = Graph("free")
    g.add_actor(Actor("a", 1, [2]))
    g.add_actor(Actor("b", 1, [3]))
    g.add_channel(Channel("ab", "a", "b", [1], [1]))
    assert throughput(g) == math.inf                  # no cycle limits auto-concurrency
    g.add_channel(Channel("sb", "b", "b", [1], [1], 1))
    assert throughput(g) == pytest.approx(1 / 3)      # a is free, b serialised: b's pace
    g.add_channel(Channel("sa", "a", "a", [1], [1], 1))
    g.actors["a"].exec_times = [7]
    assert throughput(g) == pytest.approx(1 / 7)      # both serialised: the slowest wins
    g.add_channel(Channel("ba", "b", "a", [1], [1], 0))
    assert throughput(g) == 0.0                       # a cycle without tokens


def test_auto_concurrency_bounded_by_cycle_tokens():
    # a two-actor cycle holding 2 tokens, times 3 and 1: each token goes round in 4,
    # two tokens in flight -> 2 iterations per 4 time units
    g = Graph("ring")
    g.add_actor(Actor("x", 1, [3]))
    g.add_actor(Actor("y", 1, [1]))
    g.add_channel(Channel("xy", "x", "y", [1], [1], 0))
    g.add_channel(Channel("yx", "y", "x", [1], [1], 2))
    assert throughput(g) == pytest.approx(2 / 4)


def test_compact_notation_paper_example_round_trip():
    firings = ["l1"] * 5 + ["l2"] + ["l1", "l2"] * 27 + ["l2"] * 4
    text = compact(firings)
    assert expand(text) == firings
    assert expand("{[l1] x 5, [l2], [[l1], [l2]] x 27, [l2] x 4}") == firings
    assert compact(["l1", "l2"] + ["l3", "l4", "l5"] * 32) == "{[l1], [l2], [[l3], [l4], [l5]] x 32}"
    assert len(text) < 60


def test_compact_round_trips_real_schedules():
    import random
    rng = random.Random(3)
    for _ in range(50):
        seq = [rng.choice(["a", "b", "conv_1", "x.y"]) for _ in range(rng.randint(1, 60))]
        assert expand(compact(seq)) == seq

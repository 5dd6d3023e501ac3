"""Operator reordering (explorer.memory.reorder, Liberis & Lane) and the phase-schedule policies
(csdf.schedule_policies, explorer.memory.policies): the paper's own example exactly, the DP against
brute force over every topological order, never above the topological order, the beam
fallback still a valid order; the other policies' schedules replayed row by row by the
brute-force checker of test_to_csdf (no row read before it is written, none dropped before
its last read)."""
from __future__ import annotations

from types import SimpleNamespace

import networkx as nx
from hypothesis import given, settings, strategies as st

from csdf.model import CNN
from csdf.partition_analysis import analyse_partition, demand_schedule, phase_numbers, row_buffers
from csdf.schedule_policies import asap_schedule
from csdf.to_csdf import edge_windows
from explorer.memory.reorder import Tensor, best_order, peak
from test_to_csdf import L, brute_force_rows, conv

SEED = [Tensor(1568, None, ("1",)), Tensor(3136, "1", ("2", "4")), Tensor(1568, "2", ("3",)),
        Tensor(512, "3", ("5",)), Tensor(512, "4", ("6",)), Tensor(256, "5", ("7",)),
        Tensor(256, "6", ("7",)), Tensor(512, "7")]
OPS = [str(i) for i in range(1, 8)]


def test_liberis_lane_example_exact():
    """Their Figure: order 1..7 peaks at 5,216 B (operator 3: t1 held for 4, t2, t3); the
    optimum 1, 4, 6, 2, 3, 5, 7 peaks at 4,960 B (operator 2: t1, t2 and t6 held)."""
    assert peak(OPS, SEED) == 5216 == 3136 + 1568 + 512
    best = best_order(OPS, SEED)
    assert best.exact and best.peak == 4960 == 3136 + 1568 + 256
    assert best.order == ["1", "4", "6", "2", "3", "5", "7"]
    assert peak(best.order, SEED) == 4960


@st.composite
def dags(draw):
    n = draw(st.integers(2, 8))
    tensors, ops = [], [f"o{i}" for i in range(n)]
    for i in range(n):
        readers = sorted(set(draw(st.lists(st.integers(i + 1, n - 1), max_size=3)))) if i < n - 1 else []
        tensors.append(Tensor(draw(st.integers(1, 50)), ops[i], tuple(ops[j] for j in readers)))
    if draw(st.booleans()):
        tensors.append(Tensor(draw(st.integers(1, 50)), None, (ops[0],)))
    return ops, tensors


def brute_force(ops, tensors) -> int:
    g = nx.DiGraph()
    g.add_nodes_from(ops)
    g.add_edges_from((t.producer, c) for t in tensors if t.producer for c in t.consumers)
    return min(peak(list(o), tensors) for o in nx.all_topological_sorts(g))


def valid(order, tensors) -> bool:
    at = {o: i for i, o in enumerate(order)}
    return all(at[t.producer] < at[c] for t in tensors if t.producer for c in t.consumers)


@settings(max_examples=80, deadline=None)
@given(dags())
def test_dp_is_optimal_and_never_above_topological(case):
    ops, tensors = case
    best = best_order(ops, tensors)
    assert best.exact and valid(best.order, tensors) and sorted(best.order) == sorted(ops)
    assert best.peak == peak(best.order, tensors) == brute_force(ops, tensors)
    assert best.peak <= peak(ops, tensors)
    beam = best_order(ops, tensors, width=1)          # the bounded fallback: a greedy beam
    assert valid(beam.order, tensors) and beam.peak == peak(beam.order, tensors) >= best.peak


def plain_best_order(ops, tensors, width):
    """The DP as Liberis & Lane state it, every op tried in every state: the reference for
    best_order, which tries only the ops ready in a state."""
    index = {o: i for i, o in enumerate(ops)}
    n = len(ops)
    out, pred, held0 = [0] * n, [0] * n, 0
    ins = [[] for _ in ops]
    for t in tensors:
        cmask = sum(1 << index[c] for c in t.consumers)
        if t.producer is None:
            held0 += t.size
        else:
            out[index[t.producer]] += t.size
            for c in t.consumers:
                pred[index[c]] |= 1 << index[t.producer]
        for c in t.consumers:
            ins[index[c]].append((t.size, cmask))
    level, parents, exact = {0: (0, held0)}, [], True
    for _ in range(n):
        nxt, back = {}, {}
        for s, (pk, held) in level.items():
            for o in range(n):
                if s >> o & 1 or pred[o] & ~s:
                    continue
                ws, s2 = held + out[o], s | 1 << o
                p2 = max(pk, ws)
                if s2 not in nxt or p2 < nxt[s2][0]:
                    nxt[s2] = (p2, ws - sum(z for z, m in ins[o] if not m & ~s2))
                    back[s2] = (s, o)
        if len(nxt) > width:
            exact = False
            nxt = {m: nxt[m] for m in sorted(nxt, key=lambda m: (nxt[m][0], nxt[m][1], m))[:width]}
        level = nxt
        parents.append(back)
    (s, (pk, _)), = level.items()
    order = []
    for back in reversed(parents):
        s, o = back[s]
        order.append(ops[o])
    return order[::-1], pk, exact


@settings(max_examples=60, deadline=None)
@given(dags(), st.integers(1, 6))
def test_ready_ops_only_gives_the_plain_dp(case, width):
    """Trying only the ready ops changes nothing: the same order, peak and exactness as the
    plain DP, with the exact DP and with a beam that cuts in."""
    ops, tensors = case
    for w in (width, 2000):
        got = best_order(ops, tensors, width=w)
        assert (got.order, got.peak, got.exact) == plain_best_order(ops, tensors, w)


def _branchy(height: int, split: list[bool]) -> tuple[CNN, dict[str, int]]:
    """An input, a stem conv, two branches of different lengths joined by an Add, and a
    concat-free tail: enough for the policies to differ."""
    cnn = CNN("b")
    cnn.add_layer(L("in", "Input", [], (1, 2, height, 3)))
    cnn.add_layer(conv("stem", "in", (1, 2, height, 3)))
    cnn.add_layer(conv("a1", "stem", (1, 2, height, 3)))
    cnn.add_layer(conv("a2", "a1", (1, 2, height, 3)))
    cnn.add_layer(conv("b1", "stem", (1, 2, height, 3), k=1, top=0))
    cnn.add_layer(L("add", "Add", ["a2", "b1"], (1, 2, height, 3)))
    cnn.add_layer(conv("tail", "add", (1, 2, (height + 1) // 2, 3), s=2))
    names = ["stem", "a1", "a2", "b1", "add", "tail"]
    phases = {"in": 1}
    for name, parts in zip(names, split):
        phases[name] = cnn.layer(name).output_shape[2] if parts else 1
    return cnn, phases


@settings(max_examples=40, deadline=None)
@given(st.integers(4, 12), st.lists(st.booleans(), min_size=6, max_size=6),
       st.permutations(["a1", "a2", "b1"]))
def test_policy_schedules_are_valid(height, split, branch_order):
    cnn, phases = _branchy(height, split)
    a = analyse_partition(cnn, cnn.order(), phases)
    windows = edge_windows(cnn, a.layers, a.phases)
    prio = ["in", "stem"] + list(branch_order) + ["add", "tail"]   # any priority is safe
    for firings in (asap_schedule(a.graph, a.layers), demand_schedule(a.graph, prio)):
        rows, _ = row_buffers(a.graph, windows, firings)
        replay = SimpleNamespace(phases=a.phases, layers=a.layers, firings=firings,
                                 phase_of_firing=phase_numbers(firings))
        assert brute_force_rows(cnn, replay) == rows
        assert {x: firings.count(x) for x in a.layers} == a.firing_counts

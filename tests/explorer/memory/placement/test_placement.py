"""Offset placement (explorer.memory.placement) on random DAGs, partitions, sets of J and
schedules (the strategy of test_reuse_properties): no two buffers alive together overlap in
the arena (the pairwise check of explorer.memory.validity and a second one written here), no arena
is below the most elements alive at once (explorer.report.baselines.lower_bound), the exact MILP is
never worse than the heuristics, and TFLite's greedy-by-size on a case worked by hand."""
from __future__ import annotations

from functools import partial
from unittest import mock

from hypothesis import given, settings

from explorer.report.baselines import lower_bound
from explorer.memory.lifetimes import EdgeUse, conflict, edge_uses, group_index
from explorer.memory.buffers import buffer_elements
from explorer.memory.placement import NAMES, conflict_graph, live_bound, place, planner
import explorer.memory.placement.milp as milp
from explorer.memory.placement.milp import solve
from explorer.memory.validity import check_plan
from test_reuse_properties import applications


def overlaps(uses, buffers, pipelines) -> list[tuple[str, str]]:
    """Pairs of uses alive together whose arena regions overlap, straight from offsets."""
    group = group_index(pipelines)
    at = {}
    for b in buffers:
        for name in b.edges:
            at[name] = b.offset
    out = []
    for i, a in enumerate(uses):
        for c in uses[i + 1:]:
            if (at[a.name] < at[c.name] + c.size and at[c.name] < at[a.name] + a.size
                    and conflict(a, c, group)):
                out.append((a.name, c.name))
    return out


@settings(max_examples=60, deadline=None)
@given(applications())
def test_offsets_never_overlap_live_buffers_and_respect_the_bound(case):
    app, schedules, sizes = case
    uses = edge_uses(app, schedules, sizes)
    bound, _ = lower_bound(uses, app.pipelines)
    arenas = {}
    # the MILP starts from multi-order best fit and returns its best incumbent when HiGHS
    # stops, so every assertion holds for any time limit; 0.1 s keeps 60 cases short (many
    # of them reach the limit, where each incumbent HiGHS found is decoded and checked; the
    # small ones are still solved to optimality)
    quick = partial(milp.solve, seconds=0.1)
    for name in NAMES:
        with mock.patch.object(milp, "solve", quick):
            buffers = place(uses, app.pipelines, name)
        assert check_plan(uses, buffers, app.pipelines) == [], name
        if planner(name).at_offsets:
            assert all(b.offset is not None and b.offset >= 0 for b in buffers)
            assert overlaps(uses, buffers, app.pipelines) == [], name
        arenas[name] = buffer_elements(buffers)
        assert arenas[name] >= bound, name
    assert arenas["offsets"] <= arenas["greedy-by-size"]           # it tries that order too
    assert arenas["optimal"] <= arenas["offsets"]


@settings(max_examples=60, deadline=None)
@given(applications())
def test_conflict_graph_is_the_pairwise_rule(case):
    app, schedules, sizes = case
    uses = edge_uses(app, schedules, sizes)
    group = group_index(app.pipelines)
    adj = conflict_graph(uses, app.pipelines)
    for i, a in enumerate(uses):
        assert adj[i] == {j for j, c in enumerate(uses) if j != i and conflict(a, c, group)}
    assert live_bound(uses, adj) <= lower_bound(uses, app.pipelines)[0]


def _uses(records):
    return [EdgeUse(f"t{i}", "c", s, (("p", a, b),)) for i, (s, a, b) in enumerate(records)]


def test_greedy_by_size_offsets_by_hand():
    """Largest first, smallest gap among placed neighbours: t0 (32, [0,1]) at 0; t1 (28,
    [1,3]) above t0 at 32; t2 (16, [2,4]) meets t1 only: the gap below it (32) fits, at 0;
    t3 (8, [4,5]) meets t2 only: above it at 16; t4 (4, [0,0]) meets t0 only: above at 32."""
    uses = _uses([(32, 0, 1), (28, 1, 3), (16, 2, 4), (8, 4, 5), (4, 0, 0)])
    buffers = place(uses, [["p"]], "greedy-by-size")
    assert [b.offset for b in buffers] == [0, 32, 0, 16, 32]
    assert buffer_elements(buffers) == 60 == live_bound(uses, conflict_graph(uses, [["p"]]))


def test_milp_beats_greedy_where_greedy_is_not_optimal():
    """A case where largest-first greedy leaves a hole: intervals a (4, [0,1]), b (3, [1,2]),
    c (3, [2,3]), d (2, [0,0]), e (2, [3,3]). Live bound 7; greedy: a at 0, b at 4, c at 0
    (meets b only), d at 4, e at 3 (meets c) -> 7. The MILP proves 7 optimal."""
    uses = _uses([(4, 0, 1), (3, 1, 2), (3, 2, 3), (2, 0, 0), (2, 3, 3)])
    adj = conflict_graph(uses, [["p"]])
    greedy = place(uses, [["p"]], "greedy-by-size")
    solved = solve([u.size for u in uses], adj, [b.offset for b in greedy])
    assert solved.optimal and solved.arena == 7 == live_bound(uses, adj)
    # an odd cycle of conflicts needs more than any step's live set: 5 records of 1 on a
    # 5-cycle (only neighbours conflict): chromatic number 3 > clique 2
    cyc = [EdgeUse(f"r{i}", "c", 1, ((f"q{i}", 0, 0), (f"q{(i + 1) % 5}", 0, 0))) for i in range(5)]
    pipes = [[f"q{i}"] for i in range(5)]
    adj = conflict_graph(cyc, pipes)
    assert all(len(n) == 2 for n in adj)
    best = solve([1] * 5, adj, [b.offset for b in place(cyc, pipes, "offsets")])
    assert best.optimal and best.arena == 3

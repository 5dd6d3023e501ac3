"""Row-by-row lifetimes (explorer/memory/staircase.py) and their placement
(explorer/memory/placement/rows.py): a hand case with exact numbers, the row lives against csdf's
own ring sizes, and on random uses every planner replayed row by row, step by step: no
element is held by two uses at once, no arena is below the most elements held at once
(counted here, independently), MILP <= best fit <= greedy by size."""
from __future__ import annotations

from itertools import accumulate

from hypothesis import given, settings, strategies as st

from csdf.parts import all_parts
from csdf.partition_analysis import analyse_partition, edge_occupancy
from csdf.to_csdf import edge_windows, production_rates
from explorer.memory.lifetimes import EdgeUse, Rows, group_index
from explorer.memory.buffers import buffer_elements
from explorer.memory.placement import NAMES, conflict_graph, live_bound, place
from explorer.memory.placement.rows import forbidden, segments
from explorer.memory.staircase import edge_rows, row_lives
from explorer.memory.validity import check_plan
from deploy_fixtures import tiny_cnn


def test_edge_rows_by_hand():
    """A whole producer at step 0 writes 4 rows; its consumer's two phases (steps 1, 2) read
    rows 0-2 and 1-3: row 0 is dead after step 1, rows 1-3 after step 2."""
    first, last = edge_rows([0], [1, 2], [range(0, 3), range(1, 4)], 4)
    assert first == (0, 0, 0, 0) and last == (1, 2, 2, 2)
    # a producer by parts (2 rows per phase at steps 3, 5), whole consumer at step 6
    assert edge_rows([3, 5], [6], [range(0, 4)], 4) == ((3, 3, 5, 5), (6, 6, 6, 6))


def test_staircase_lets_a_buffer_use_freed_rows():
    """A: 4 rows of 2 written at step 0, row r last read at step r + 1; B: 2 elements over
    steps 3..5. As rectangles they conflict (arena 10); by rows, B fits below A's live rows
    from step 3 on (A holds rows 2-3 then: elements 4..8), so the arena is 8, the bound."""
    a = EdgeUse("a", "c", 8, (("p", 0, 4),), Rows(2, (0, 0, 0, 0), (1, 2, 3, 4)))
    b = EdgeUse("b", "c", 2, (("p", 3, 5),))
    assert segments(a)["p"] == [(0, 2, 0, 8), (2, 3, 2, 8), (3, 4, 4, 8), (4, 5, 6, 8)]
    assert forbidden(segments(b), 2, segments(a), 8, set()) == [(2, 8)]   # o_b - o_a
    for name in NAMES:
        buffers = place([a, b], [["p"]], name)
        expect = 10 if name == "shared-objects" else 8
        assert buffer_elements(buffers) == expect, name
        assert check_plan([a, b], buffers, [["p"]]) == []
    rect = [EdgeUse("a", "c", 8, (("p", 0, 4),)), b]
    assert buffer_elements(place(rect, [["p"]], "offsets")) == 10
    assert live_bound([a, b], conflict_graph([a, b], [["p"]])) == 8


def test_row_lives_agree_with_ring_sizes(tmp_path):
    """On a real CNN with every layer by parts (and whole producers feeding parts): for each
    whole edge stored by rows, the most rows alive at once under its Rows equals the rows
    csdf.partition_analysis.edge_occupancy finds by its own replay."""
    cnn = tiny_cnn(tmp_path)
    layers = cnn.order()
    for phases in (all_parts(cnn), {x: (n if i % 2 else 1) for i, (x, n) in enumerate(all_parts(cnn).items())}):
        a = analyse_partition(cnn, layers, phases)
        lives = row_lives(cnn, layers, phases, a.firings, a.edge_rows)
        assert lives, phases
        windows = edge_windows(cnn, a.layers, a.phases)
        at = {}
        for t, x in enumerate(a.firings):
            at.setdefault(x, []).append(t)
        for (src, dst), life in lives.items():
            height = int(cnn.edge_shape(src, dst)[2])
            rates = production_rates(height, a.phases[src])
            held, _, _ = edge_occupancy(rates, at[src], windows[(src, dst)], at[dst], height)
            most = max(max(0, hi - lo) for lo, hi in (life.live(t) for t in range(len(a.firings))))
            assert most == held, (src, dst)
            assert a.edge_rows[(src, dst)] == height and len(life.first) == height


@st.composite
def stair_uses(draw):
    """Uses in 1-3 partitions (the first two maybe one pipeline set), plain or by rows."""
    parts = [f"p{k}" for k in range(draw(st.integers(1, 3)))]
    pipelines = ([parts[:2]] + [[p] for p in parts[2:]]) if len(parts) > 1 and draw(st.booleans()) \
        else [[p] for p in parts]
    uses = []
    for i in range(draw(st.integers(1, 10))):
        p = draw(st.sampled_from(parts))
        a = draw(st.integers(0, 8))
        b = draw(st.integers(a, a + 8))
        if draw(st.booleans()):
            h, row = draw(st.integers(1, 6)), draw(st.integers(1, 5))
            first = sorted(draw(st.lists(st.integers(a, b), min_size=h, max_size=h)))
            first[0] = a
            ends = [draw(st.integers(f, b)) for f in first]
            last = list(accumulate(ends, max))
            uses.append(EdgeUse(f"t{i}", "c", h * row, ((p, a, b),), Rows(row, tuple(first), tuple(last))))
        else:
            uses.append(EdgeUse(f"t{i}", "c", draw(st.integers(1, 30)), ((p, a, b),)))
    return uses, pipelines


def held(use: EdgeUse, offset: int, step: int) -> set[int]:
    """Arena elements holding `use`'s data at `step`, row by row from its Rows."""
    _, a, b = use.spans[0]
    if not a <= step <= b:
        return set()
    if use.rows is None:
        return set(range(offset, offset + use.size))
    r = use.rows
    return {offset + k * r.row + e for k in range(len(r.first)) if r.first[k] <= step <= r.last[k]
            for e in range(r.row)}


@settings(max_examples=80, deadline=None)
@given(stair_uses())
def test_planners_never_overlap_a_live_row(case):
    uses, pipelines = case
    group = group_index(pipelines)
    steps = range(0, 20)
    bound = max(sum(len(held(u, 0, t)) for u in uses if u.spans[0][0] == p)
                for p in group for t in steps)
    arenas = {}
    for name in NAMES:
        buffers = place(uses, pipelines, name)
        assert check_plan(uses, buffers, pipelines) == [], name
        arenas[name] = buffer_elements(buffers)
        assert arenas[name] >= bound, name
        if name == "shared-objects":
            continue
        at = {n: b.offset for b in buffers for n in b.edges}
        for i, u in enumerate(uses):
            for v in uses[i + 1:]:
                pu, pv = u.spans[0][0], v.spans[0][0]
                if pu == pv:
                    for t in steps:
                        assert not held(u, at[u.name], t) & held(v, at[v.name], t), (name, u, v, t)
                elif group[pu] == group[pv]:        # parallel partitions: regions apart
                    assert at[u.name] + u.size <= at[v.name] or at[v.name] + v.size <= at[u.name]
    assert live_bound(uses, conflict_graph(uses, pipelines)) == bound
    assert arenas["offsets"] <= arenas["greedy-by-size"]
    assert arenas["optimal"] <= arenas["offsets"]

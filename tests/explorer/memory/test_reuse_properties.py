"""Property tests on random DAGs, partitions, sets of J, schedules with repeated firings
(phases) and reduced edge sizes: every plan from Algorithm 1 and from the baselines passes
the validity check, reuse never exceeds naive and never goes below the lower bound, and
Algorithm 1 equals a plain re-statement of the paper's pseudo-code."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from csdf.model import CNN, INPUT, Layer
from explorer.app.model import Application, Partition
from explorer.report.baselines import lower_bound, pisarchyk, sequential_uses
from explorer.memory.lifetimes import conflict, edge_uses, group_index
from explorer.memory.buffers import Buffer, naive
from explorer.memory.reuse import algorithm1
from explorer.memory.validity import check_plan


@st.composite
def applications(draw):
    """1-3 random CNNs (DAGs in index order), each cut into 1-3 contiguous partitions, the
    partitions grouped at random into sets of J, random flat schedules with extra firings,
    and random reduced sizes for edges inside a partition."""
    cnns, parts = {}, []
    for c in range(draw(st.integers(1, 3))):
        name = f"c{c}"
        n = draw(st.integers(2, 7))
        cnn = CNN(name)
        for i in range(n):
            srcs = [] if i == 0 else sorted(set(draw(st.lists(st.integers(0, i - 1), min_size=1, max_size=3))))
            shape = (1, draw(st.integers(1, 4)), draw(st.integers(1, 6)), 2)
            cnn.add_layer(Layer(f"l{i}", INPUT if not srcs else "Synthetic",
                                inputs=[f"l{s}" for s in srcs], output_shape=shape))
        cnns[name] = cnn
        order = cnn.order()
        cuts = sorted(set(draw(st.lists(st.integers(1, n - 1), max_size=2))))
        bounds = [0] + cuts + [n]
        for k in range(len(bounds) - 1):
            parts.append(Partition(f"{name}.p{k}", name, order[bounds[k]:bounds[k + 1]]))
    labels = draw(st.lists(st.integers(0, 2), min_size=len(parts), max_size=len(parts)))
    pipelines = [[p.name for p, g in zip(parts, labels) if g == k] for k in range(3)]
    pipelines = [g for g in pipelines if g]
    schedules, sizes = {}, {}
    for p in parts:
        sched = list(p.layers)
        for layer in p.layers:
            for _ in range(draw(st.integers(0, 2))):     # extra firings after the first
                at = sched.index(layer) + 1
                sched.insert(draw(st.integers(at, len(sched))), layer)
        schedules[p.name] = sched
        cnn = cnns[p.cnn]
        inside = set(p.layers)
        for u, v in cnn.edges():
            if u in inside and v in inside and draw(st.booleans()):
                sizes[f"{p.cnn}.{u}->{v}"] = draw(st.integers(1, cnn.edge_elements(u, v)))
    app = Application("random", cnns, parts, pipelines)
    return app, schedules, sizes


def paper_algorithm1(uses, pipelines):
    """Algorithm 1 written straight from the paper with the pairwise conflict rule."""
    group = group_index(pipelines)
    buffers, held = [], []
    for use in uses:
        suitable = [k for k, hs in enumerate(held) if not any(conflict(use, h, group) for h in hs)]
        if suitable:
            k = min(suitable, key=lambda k: (max(use.size - buffers[k].size, 0), k))
            buffers[k].edges.append(use.name)
            buffers[k].size = max(buffers[k].size, use.size)
            held[k].append(use)
        else:
            buffers.append(Buffer([use.name], use.size))
            held.append([use])
    return buffers


@settings(max_examples=150, deadline=None)
@given(applications())
def test_plans_are_valid_and_reuse_is_bounded(case):
    app, schedules, sizes = case
    uses = edge_uses(app, schedules, sizes)
    names = [u.name for u in uses]
    assert len(names) == len(set(names))
    reuse = algorithm1(uses, app.pipelines)
    assert check_plan(uses, reuse, app.pipelines) == []
    assert check_plan(uses, naive(uses), app.pipelines) == []
    total = sum(b.size for b in reuse)
    assert total <= sum(u.size for u in uses)
    assert total >= lower_bound(uses, app.pipelines)[0]
    assert [(b.edges, b.size) for b in reuse] == [(b.edges, b.size) for b in paper_algorithm1(uses, app.pipelines)]


@settings(max_examples=100, deadline=None)
@given(applications())
def test_pisarchyk_plans_are_valid_per_cnn(case):
    app, schedules, sizes = case
    seq = sequential_uses(app, schedules, sizes)
    buffers = pisarchyk(seq)
    for cnn, uses in seq.items():
        mine = [b for b in buffers if b.edges[0].split(".")[0] == cnn]
        assert check_plan(uses, mine, [[f"{cnn}.sequential"]]) == []
    assert all(len({e.split(".")[0] for e in b.edges}) == 1 for b in buffers)
    assert sum(b.size for b in buffers) <= sum(u.size for us in seq.values() for u in us)

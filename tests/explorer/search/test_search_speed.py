"""The search's fast paths give exactly what the slow, obvious definitions give.

The derivation of a chromosome is sped up by a demand-driven scheduler that only looks at
the actors a firing can affect, by an occupancy count per producer firing instead of a
replay per row, by per-CNN caches (topological order, channel rates) and by reusing the last
placements. Here each is replaced by its definition, written out plainly (a scan of every
actor at every step; a replay of every row's life; no caches; every placement order tried),
and the results (schedules, rows, and a whole NSGA-II front with its plans) must be equal.
"""
from __future__ import annotations

import random
from dataclasses import replace
from itertools import accumulate
from pathlib import Path

import pytest

import csdf.partition_analysis as pa
import csdf.to_csdf as tc
import explorer.plan.derive as dv
import explorer.memory.placement as placement
import explorer.memory.placement.best_fit as best_fit
import explorer.memory.placement.rows as rows_mod
import explorer.memory.policies as policies
from csdf.model import CNN
from csdf.schedule_policies import asap_schedule
from csdf.to_csdf import edge_windows, to_csdf
from explorer.app.appfile import load_app
from explorer.memory.cache import RunCache
from explorer.plan.derive import Evaluation, derive, plan_for, whole_phases
from explorer.plan.genes import gene_space
from explorer.memory.placement.rows import Geometry, has_rows
from explorer.search.algorithm2 import algorithm2
from explorer.throughput.evaluator import make_evaluator

APP1 = Path(__file__).resolve().parents[3] / "apps" / "table12_app1_mobilenet_v2.yaml"


# ---- the obvious definitions ----------------------------------------------------------------

def scan_schedule(graph, order):
    """Demand-driven schedule by its definition: at every step look at every actor; fire
    the ready one with a starved consumer (or none) latest in `order`, else the ready one
    latest in `order`."""
    idx = {name: i for i, name in enumerate(order)}
    chans = [ch for ch in graph.channels if ch.src != ch.dst]
    tok = {ch.name: ch.initial_tokens for ch in chans}
    nxt = {name: 0 for name in order}
    phases = {name: graph.actors[name].phases for name in order}

    ins = {a: [ch for ch in chans if ch.dst == a] for a in order}
    outs = {a: [ch for ch in chans if ch.src == a] for a in order}

    def ready(a):
        p = nxt[a]
        return p < phases[a] and all(tok[ch.name] >= ch.cons[p] for ch in ins[a])

    def starved(a):
        return not outs[a] or any(nxt[ch.dst] < phases[ch.dst] and
                                  tok[ch.name] < ch.cons[nxt[ch.dst]] for ch in outs[a])

    firings = []
    while True:
        cands = [a for a in order if ready(a)]
        if not cands:
            break
        a = min(cands, key=lambda x: (0 if starved(x) else 1, -idx[x]))
        p = nxt[a]
        for ch in outs[a]:
            tok[ch.name] += ch.prod[p]
        for ch in ins[a]:
            tok[ch.name] -= ch.cons[p]
        nxt[a] += 1
        firings.append(a)
    assert all(nxt[a] == phases[a] for a in order)
    return firings


def replay_rows(graph, windows, firings, cache=None):
    """Rows of every edge by replaying each row's life: claimed when the producer firing
    writing it starts, freed at the end of the consumer phase after which neither it nor
    an earlier row is read again; the most alive at once, rounded to whole parts."""
    at = {name: [] for name in graph.actors}
    for step, name in enumerate(firings):
        at[name].append(step)
    rows, spans = {}, {}
    for ch in graph.channels:
        if ch.src == ch.dst:
            continue
        edge = (ch.src, ch.dst)
        height = sum(ch.prod)
        claim = [step for step, n in zip(at[ch.src], ch.prod) for _ in range(n)]
        last = [-1] * height
        for step, reads in zip(at[ch.dst], windows[edge]):
            for r in reads:
                last[r] = max(last[r], step)
        free = [max(c, f) for c, f in zip(claim, accumulate(last, max))]
        events = sorted([(c, +1) for c in claim] + [(f + 1, -1) for f in free])
        held = max(accumulate(d for _, d in events))
        rows[edge] = pa.ring_rows(held, ch.prod[0], height)
        spans[edge] = (claim[0], free[-1])
    return rows, spans


def every_order_offsets(uses, adj, pipelines=None):
    """Every visiting order and both fits, then (plain rectangles) every order against the
    live bound, the strictly least arena kept (first on ties);
    uses with row-by-row lifetimes placed by explorer/memory/placement/rows.py as best fit does."""
    sizes = [u.size for u in uses]
    geometry = Geometry(uses, adj, pipelines or []) if has_rows(uses) else None
    best, best_end = [], None
    for order in best_fit.orders(uses, adj):
        for how in (True, False):
            off = best_fit.offsets(sizes, adj, order, how, geometry)
            end = best_fit.extent(sizes, off)
            if best_end is None or end < best_end:
                best, best_end = off, end
    if geometry is None:                  # plain rectangles: also against the live bound
        floor = best_fit.live_bound(uses, adj)
        for order in best_fit.orders(uses, adj):
            off = best_fit.ceiling_offsets(sizes, adj, order, floor)
            end = best_fit.extent(sizes, off)
            if end < best_end:
                best, best_end = off, end
    return best


def random_firings(graph, order, rnd):
    """A valid schedule under CSDF token rules, a random ready actor at each step."""
    chans = [ch for ch in graph.channels if ch.src != ch.dst]
    tok = {ch.name: 0 for ch in chans}
    nxt = {a: 0 for a in order}
    out = []
    while True:
        ready = [a for a in order if nxt[a] < graph.actors[a].phases and
                 all(tok[ch.name] >= ch.cons[nxt[a]] for ch in chans if ch.dst == a)]
        if not ready:
            return out
        a = rnd.choice(ready)
        for ch in chans:
            if ch.src == a:
                tok[ch.name] += ch.prod[nxt[a]]
            if ch.dst == a:
                tok[ch.name] -= ch.cons[nxt[a]]
        nxt[a] += 1
        out.append(a)


# ---- fixtures -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def app1():
    return load_app(APP1, mem="0")


def chromosomes(app, count, seed):
    """Random ladder chromosomes, each gene by parts with probability 0.4 (as a search's
    population mostly is), plus every layer at k = 2 and row by row."""
    space = gene_space(app, "ladder")
    rnd = random.Random(seed)
    out = [tuple(rnd.randint(1, u) if rnd.random() < 0.4 else 0 for u in space.upper)
           for _ in range(count)]
    out.append(tuple(min(len(r) - 2, u) for r, u in zip(space.ladders, space.upper)))
    out.append(space.row_by_row())
    return space, out


# ---- tests --------------------------------------------------------------------------------

def test_schedules_and_rows_equal_their_definitions(app1):
    cnn = app1.cnns["mobilenet_v2"]
    order = cnn.order()
    space, chroms = chromosomes(app1, 5, seed=11)
    rnd = random.Random(7)
    for genes in chroms:
        phases = space.decode(genes, whole_phases(app1))["mobilenet_v2"]
        windows = edge_windows(cnn, order, phases)
        graph = to_csdf(cnn, order, phases, windows=windows)
        prio = order[:1] + rnd.sample(order[1:], len(order) - 1)     # any priority is valid
        for ranked in (order, prio):
            assert pa.demand_schedule(graph, ranked) == scan_schedule(graph, ranked)
        for firings in (pa.demand_schedule(graph, order), asap_schedule(graph, order),
                        random_firings(graph, order, rnd)):
            assert pa.row_buffers(graph, windows, firings) == replay_rows(graph, windows, firings)


def test_occupancy_by_hand():
    """One phase on either side holds every row; k = 2 rows per producer part read by a
    3-row window of stride 2 (rows 0-1, 1-3, 3-5 at steps 1, 3, 5): rows 1-3 alive at step
    2 and rows 3-5 at step 4, so 3 at most, from step 0 to step 5."""
    assert pa.edge_occupancy([6], [0], [range(0, 6, 2), range(3, 6)], [1, 2], 6) == (6, 0, 2)
    assert pa.edge_occupancy([2, 2, 2], [0, 1, 2], [range(6)], [3], 6) == (6, 0, 3)
    windows = [range(0, 2), range(1, 4), range(3, 6)]
    assert pa.edge_occupancy([2, 2, 2], [0, 2, 4], windows, [1, 3, 5], 6) == (3, 0, 5)


def test_order_cache_follows_the_graph():
    from csdf.model import Layer
    cnn = CNN("c")
    cnn.add_layer(Layer("a", "Input", {}, {}, [], [1, 1, 4, 4]))
    cnn.add_layer(Layer("b", "Relu", {}, {}, ["a"], [1, 1, 4, 4]))
    assert cnn.order() == ["a", "b"] and cnn.edges() == [("a", "b")]
    cnn.order().append("x")                       # a copy: the cache is not touched
    cnn.add_layer(Layer("c", "Add", {}, {}, ["a", "b"], [1, 1, 4, 4]))
    assert cnn.order() == ["a", "b", "c"]
    assert cnn.edges() == [("a", "b"), ("a", "c"), ("b", "c")]


def search_run(app, granularity, cache=None, **stages):
    """A short search on `app` and its front's plans. The stages after NSGA-II (path
    relinking, local search) only ask `evaluate` for more chromosomes, so they are off unless
    `stages` turns them on (explorer.search.algorithm2 counts them apart). `cache`: the
    evaluation's explorer.memory.cache.RunCache (default: a fresh one)."""
    settings = replace(app.search, population=8, generations=3, seed=5,
                       granularity=granularity, relink_rounds=0, local_rounds=0)
    settings = replace(settings, **stages)
    evaluate = Evaluation(app, make_evaluator(app), space=gene_space(app, granularity),
                          cache=cache or RunCache())
    outcome = algorithm2(app, evaluate, settings)
    plans = []
    for p in outcome.front:
        d = derive(app, evaluate.phases(p.genes))
        plan = plan_for(app, d, p.fps, True, p.genes)
        plans.append((plan.memory_bytes, plan.buffer_bytes, plan.fps, plan.firings,
                      [(b.edges, b.elements, b.offset) for b in plan.buffers]))
    return [(p.genes, p.memory_bytes, p.fps) for p in outcome.front], outcome.result.unique, plans


@pytest.mark.parametrize("granularity", ["ladder", "binary"])
def test_search_front_and_plans_equal_the_obvious_path(app1, monkeypatch, granularity):
    fast = search_run(app1, granularity)
    assert search_run(app1, granularity) == fast                  # deterministic per seed
    with monkeypatch.context() as m:
        for mod in (pa, policies):
            m.setattr(mod, "demand_schedule", scan_schedule)
        for mod in (pa, policies, dv):
            m.setattr(mod, "row_buffers", replay_rows)
        m.setattr(CNN, "_cached", lambda self, what, make: list(make()))
        m.setattr(tc, "channel_rates", lambda cnn, s, d, n, reads, kept=None: (
            tc.production_rates(int(cnn.edge_shape(s, d)[2]), n),
            tc.consumption_rates(reads, int(cnn.edge_shape(s, d)[2])), tc.token_size(cnn, s, d)))
        m.setattr(best_fit, "best_offsets", every_order_offsets)
        m.setattr(rows_mod, "FAST", False)
        slow = search_run(app1, granularity, RunCache(analyses=0, placements=0))
    assert slow == fast
    assert len(fast[0]) >= 3


def test_row_placement_arrays_equal_the_plain_scan(monkeypatch, tmp_path):
    """rows.Geometry's mirrored pairs, neighbour arrays and running-maximum fit give the
    offsets of the plain pair-by-pair scan under every visiting order and both fits, on
    DenseNet-121 in torchvision's form (feature maps with up to 25 readers: uses with many
    neighbours), the arrays used from the first neighbour on."""
    path = tmp_path / "dn.yaml"
    path.write_text("name: dn\ncnns:\n  - {name: net, model: 'zoo:densenet121_tv'}\n")
    app = load_app(path, mem="0")
    evaluate = Evaluation(app, make_evaluator(app))            # the paper's binary genes
    rnd = random.Random(3)
    genes = tuple(rnd.randint(0, 1) for _ in evaluate.where)
    uses = derive(app, evaluate.phases(genes)).uses
    adj = placement.conflict_graph(uses, app.pipelines)
    sizes = [u.size for u in uses]
    assert has_rows(uses) and max(len(a) for a in adj) > 50
    monkeypatch.setattr(rows_mod, "MANY", 0)
    got = {}
    for fast in (True, False):
        monkeypatch.setattr(rows_mod, "FAST", fast)
        geometry = Geometry(uses, adj, app.pipelines)
        got[fast] = [best_fit.offsets(sizes, adj, order, how, geometry)
                     for order in best_fit.orders(uses, adj) for how in (True, False)]
    assert got[True] == got[False]
    assert got[True][0] != got[True][1]           # best and first fit differ: both exercised

"""csdf.analysis_cache and explorer.memory.cache: a cache reused over many questions gives
the answers computed without one, and a CNN whose graph changed is not served answers about
its old graph."""
from __future__ import annotations

import pickle
import random

import numpy as np

from csdf.analysis_cache import AnalysisCache, Recent
from csdf.model import CNN, Layer
from csdf.partition_analysis import analyse_partition, first_reads
from csdf.to_csdf import edge_windows, to_csdf
from explorer.memory.buffers import param_elements
from explorer.memory.cache import RunCache
from explorer.memory.lifetimes import cnn_edges


def _layer(name, op, inputs, shape, **hyper):
    return Layer(name, op, hyper, inputs=inputs, output_shape=shape)


def _conv(name, src, shape, k=3):
    return _layer(name, "Conv", [src], shape, kernel_shape=[k, k], strides=[1, 1],
                  pads=[k // 2, k // 2, k // 2, k // 2], dilations=[1, 1], group=1)


def _net(height=16, kernel=3) -> CNN:
    """in -> a -> b -> add(a, b) -> c: a branch that joins, convolutions by parts."""
    cnn = CNN("net")
    cnn.add_layer(_layer("in", "Input", [], (1, 2, height, 5)))
    cnn.add_layer(_conv("a", "in", (1, 3, height, 5), kernel))
    cnn.add_layer(_conv("b", "a", (1, 3, height, 5), kernel))
    cnn.add_layer(_layer("add", "Add", ["a", "b"], (1, 3, height, 5)))
    cnn.add_layer(_conv("c", "add", (1, 4, height, 5), kernel))
    return cnn


def _facts(a):
    """Everything an analysis answers, as plain data."""
    channels = [(ch.name, list(ch.prod), list(ch.cons), ch.token_size) for ch in a.graph.channels]
    return (a.layers, a.phases, a.firings, a.phase_of_firing, a.firing_counts, a.edge_rows,
            a.edge_elements, a.edge_steps, {e: [list(w) for w in ws] for e, ws in a.windows.items()},
            channels)


def _phase_choices(cnn: CNN, n: int, seed: int) -> list[dict[str, int]]:
    rnd = random.Random(seed)
    return [{x: rnd.choice([1, 2, 4, 8]) for x in cnn.order()} for _ in range(n)]


def test_a_reused_cache_answers_as_no_cache_does():
    cnn = _net()
    cache = AnalysisCache(analyses=4)        # few kept: answers are both kept and remade
    choices = _phase_choices(cnn, 12, seed=1)
    for phases in choices + choices[::-1] + choices:
        fresh = analyse_partition(cnn, cnn.order(), phases)
        kept = analyse_partition(cnn, cnn.order(), phases, cache)
        assert _facts(kept) == _facts(fresh)
        for part in (["in", "a", "b"], ["b", "add", "c"]):
            assert _facts(analyse_partition(cnn, part, phases, cache)) == \
                _facts(analyse_partition(cnn, part, phases))
    # the kept windows lists are handed out again, and their first-read tables with them
    phases = choices[0]
    w1 = edge_windows(cnn, cnn.order(), phases, cache)
    w2 = edge_windows(cnn, cnn.order(), phases, cache)
    assert all(w1[e] is w2[e] for e in w1)
    for e, ws in w1.items():
        height = cnn.edge_shape(*e)[2]
        assert first_reads(ws, height, cache) == first_reads([range(r.start, r.stop) for r in ws],
                                                             height)


def test_a_cache_serves_two_cnns_of_one_name_apart():
    small, tall = _net(height=16), _net(height=24, kernel=5)
    cache = AnalysisCache()
    phases = {x: 4 for x in small.order()}
    for cnn in (small, tall, small, tall):
        assert _facts(analyse_partition(cnn, cnn.order(), phases, cache)) == \
            _facts(analyse_partition(cnn, cnn.order(), phases))
    assert analyse_partition(small, small.order(), phases, cache).edge_rows != \
        analyse_partition(tall, tall.order(), phases, cache).edge_rows


def test_a_changed_graph_gets_fresh_answers():
    cnn = _net()
    cache, run = AnalysisCache(), RunCache()
    phases = {x: 4 for x in cnn.order()}
    before = analyse_partition(cnn, cnn.order(), phases, cache)
    assert ("in", "c") not in before.edge_rows
    edges_before = cnn_edges(cnn, run)
    params_before = param_elements(cnn, run)
    # a new edge between layers already there: same layers, same phases, another graph
    cnn.graph.add_edge("in", "c", shape=cnn.layer("in").output_shape)
    after = analyse_partition(cnn, cnn.order(), phases, cache)
    assert ("in", "c") in after.edge_rows
    assert _facts(after) == _facts(analyse_partition(cnn, cnn.order(), phases))
    assert [e[:2] for e in cnn_edges(cnn, run)] == cnn.edges()
    assert ("in", "c") in cnn.edges() and ("in", "c") not in [e[:2] for e in edges_before]
    # a new layer with parameters: its edge and its weights count
    cnn.add_layer(_layer("d", "Conv", ["c"], (1, 2, 16, 5), kernel_shape=[1, 1]))
    cnn.layer("d").params["W"] = np.zeros((2, 4, 1, 1), np.float32)
    cnn.add_layer(_layer("e", "Relu", ["d"], (1, 2, 16, 5)))
    assert param_elements(cnn, run) == params_before + 8 == cnn.param_count
    assert [e[:2] for e in cnn_edges(cnn, run)] == cnn.edges()
    assert len(cnn_edges(cnn, run)) == len(edges_before) + 3
    graph = to_csdf(cnn, cnn.order(), {x: 2 for x in cnn.order()}, cache=cache)
    plain = to_csdf(cnn, cnn.order(), {x: 2 for x in cnn.order()})
    assert [(c.name, c.prod, c.cons, c.token_size) for c in graph.channels] == \
        [(c.name, c.prod, c.cons, c.token_size) for c in plain.channels]


def test_a_pickled_cache_starts_empty_and_works():
    cnn = _net()
    run = RunCache()
    phases = {x: 2 for x in cnn.order()}
    first = analyse_partition(cnn, cnn.order(), phases, run.analysis)
    run.views.put("k", 1)
    copy_cnn, copy = pickle.loads(pickle.dumps((cnn, run)))
    assert len(copy.views) == 0 and copy.analysis.cnns.kept == {} and copy.analysis.first_reads == {}
    assert copy.views.limit == run.views.limit
    again = analyse_partition(copy_cnn, copy_cnn.order(), phases, copy.analysis)
    assert _facts(again) == _facts(first)


def test_recent_keeps_the_newest():
    kept = Recent(2)
    for k in "abc":
        kept.put(k, k.upper())
    assert "a" not in kept and kept.get("b") == "B" and kept.get("c") == "C" and len(kept) == 2

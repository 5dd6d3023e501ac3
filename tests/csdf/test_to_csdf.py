"""CNN partition -> CSDF graph, schedule and real row-buffer sizes.

Buffer sizes are checked against a brute-force row-liveness simulation written here from the
definitions (rows as sets, freed in order once no later phase of the consumer reads them),
not against the code's own output; the Figure 3 figures are the paper's."""
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from csdf.model import CNN, Layer
from csdf.partition_analysis import analyse_partition
from csdf.to_csdf import to_csdf
from sdf3.notation import expand

from conftest import DATA  # noqa: E402


def L(name, op, inputs, shape, **hyper):
    return Layer(name, op, hyper, inputs=inputs, output_shape=shape)


def conv(name, src, shape, k=3, s=1, top=1, bottom=None, d=1):
    bottom = top if bottom is None else bottom
    return L(name, "Conv", [src], shape, kernel_shape=[k, k], strides=[s, s],
             pads=[top, 1, bottom, 1], dilations=[d, d], group=1)


def reads(cnn, phases, src, dst, p):
    """Rows of edge src->dst read by phase p of dst, straight from the definitions."""
    height = cnn.edge_shape(src, dst)[2]
    layer = cnn.layer(dst)
    if phases[dst] == 1:
        return set(range(height))
    if height == 1:
        return {0}
    if layer.op in ("Conv", "MaxPool", "AveragePool"):
        k, s, d, pad = (layer.hyper["kernel_shape"][0], layer.hyper["strides"][0],
                        layer.hyper.get("dilations", [1])[0], layer.hyper["pads"][0])
        return {p * s - pad + i * d for i in range(k)} & set(range(height))
    return {p}


def brute_force_rows(cnn, a):
    """Replay a's firings with explicit sets of live rows per edge; check every phase finds
    the rows it reads; return the most rows each edge held at once."""
    phases, inside = a.phases, set(a.layers)
    edges = [(u, v) for u, v in cnn.graph.edges if u in inside and v in inside]
    live = {e: set() for e in edges}
    made = {e: set() for e in edges}
    done = {name: -1 for name in a.layers}       # last finished phase of each layer
    most = {e: 0 for e in edges}
    for name, p in zip(a.firings, a.phase_of_firing):
        assert p == done[name] + 1
        for e in edges:
            if e[1] == name:
                need = reads(cnn, phases, *e, p)
                assert need <= live[e], f"{e}: phase {p} misses rows {need - live[e]}"
            if e[0] == name:
                height = cnn.edge_shape(*e)[2]
                rows = {p} if phases[name] > 1 else set(range(height))
                assert not rows & made[e]
                made[e] |= rows
                live[e] |= rows
        for e in edges:
            most[e] = max(most[e], len(live[e]))
        done[name] = p
        for e in edges:
            later = set().union(*(reads(cnn, phases, *e, q)
                                  for q in range(done[e[1]] + 1, phases[e[1]])))
            for r in sorted(live[e]):
                if any(x <= r for x in later):
                    break
                live[e].discard(r)
    assert all(not rows for rows in live.values())
    return most


def test_figure3_exact_padding():
    """Paper Figure 3: 32-row input and a 5x5 'same' conv, both by parts: 480 elements."""
    cnn = CNN("CNN1")
    cnn.add_layer(L("l1", "Input", [], (1, 3, 32, 32)))
    cnn.add_layer(conv("l2", "l1", (1, 8, 32, 32), k=5, top=2))
    a = analyse_partition(cnn, ["l1", "l2"], {"l1": 32, "l2": 32})
    assert a.edge_elements == {("l1", "l2"): 480}
    assert a.edge_rows == {("l1", "l2"): 5}
    assert a.firing_counts == {"l1": 32, "l2": 32}
    # with the top padding counted, the first phase needs rows 0-2 only
    assert a.firings == ["l1"] * 3 + ["l2"] + ["l1", "l2"] * 29 + ["l2"] * 2
    assert a.graph.channel("l1->l2").cons == [3] + [1] * 29 + [0, 0]
    assert a.graph.channel("l1->l2").token_size == 96
    # SDF3's token count undercounts the window: 3 tokens (the first phase's rows), 5 rows real
    assert a.csdf_tokens == {("l1", "l2"): 3}
    assert brute_force_rows(cnn, a) == a.edge_rows


def test_figure3_paper_schedule_without_top_padding():
    """The paper's schedule {[l1] x 5, [l2], [[l1], [l2]] x 27, [l2] x 4} is that of a window
    with no top padding (all 4 padding rows at the bottom); the buffer is 480 either way."""
    cnn = CNN("CNN1")
    cnn.add_layer(L("l1", "Input", [], (1, 3, 32, 32)))
    cnn.add_layer(conv("l2", "l1", (1, 8, 32, 32), k=5, top=0, bottom=4))
    a = analyse_partition(cnn, ["l1", "l2"], {"l1": 32, "l2": 32})
    assert a.firings == ["l1"] * 5 + ["l2"] + ["l1", "l2"] * 27 + ["l2"] * 4
    assert expand(a.schedule) == expand("{[l1] x 5, [l2], [[l1], [l2]] x 27, [l2] x 4}")
    assert a.edge_elements == {("l1", "l2"): 480}


def test_sdf3_example1_rates():
    """SDF3's ex1: a 3x3 window over 5 rows, no top padding: consumption 3,1,1,0,0."""
    cnn = CNN("ex1")
    cnn.add_layer(L("in", "Input", [], (1, 1, 5, 5)))
    cnn.add_layer(conv("conv", "in", (1, 1, 5, 5), k=3, top=0, bottom=2))
    g = to_csdf(cnn, ["in", "conv"], {"in": 5, "conv": 5})
    ch = g.channel("in->conv")
    assert (ch.prod, ch.cons) == ([1] * 5, [3, 1, 1, 0, 0])
    assert g.actors["conv"].phases == 5
    loops = to_csdf(cnn, ["in", "conv"], {"in": 5, "conv": 5}, self_loops=True)
    assert {c.name: c.initial_tokens for c in loops.channels if c.src == c.dst} == {
        "in->in": 1, "conv->conv": 1}


def chain_stride2():
    cnn = CNN("s2")
    cnn.add_layer(L("in", "Input", [], (1, 4, 8, 8)))
    cnn.add_layer(conv("c", "in", (1, 6, 4, 4), k=3, s=2, top=1))
    cnn.add_layer(L("act", "Relu", ["c"], (1, 6, 4, 4)))
    return cnn


def test_stride2_with_padding():
    cnn = chain_stride2()
    a = analyse_partition(cnn, ["in", "c", "act"], {"in": 8, "c": 4, "act": 4})
    # phase p reads rows 2p-1..2p+1: {0,1}, {1,2,3}, {3,4,5}, {5,6,7}; 3 rows at most
    assert a.graph.channel("in->c").cons == [2, 2, 2, 2]
    assert a.edge_rows == {("in", "c"): 3, ("c", "act"): 1}
    assert a.edge_elements == {("in", "c"): 3 * 4 * 8, ("c", "act"): 6 * 4}
    assert brute_force_rows(cnn, a) == a.edge_rows


def test_stride_leaves_bottom_rows_unread():
    """3x3 stride 2 without padding over 8 rows: row 7 is never read; CSDF's balance puts it
    in the last phase's consumption."""
    cnn = CNN("s2v")
    cnn.add_layer(L("in", "Input", [], (1, 1, 8, 8)))
    cnn.add_layer(conv("c", "in", (1, 1, 3, 3), k=3, s=2, top=0))
    a = analyse_partition(cnn, ["in", "c"], {"in": 8, "c": 3})
    assert a.graph.channel("in->c").cons == [3, 2, 3]
    assert brute_force_rows(cnn, a) == a.edge_rows


def residual():
    cnn = CNN("res")
    cnn.add_layer(L("in", "Input", [], (1, 2, 10, 10)))
    cnn.add_layer(conv("c1", "in", (1, 2, 10, 10)))
    cnn.add_layer(conv("c2", "c1", (1, 2, 10, 10)))
    cnn.add_layer(L("add", "Add", ["c2", "in"], (1, 2, 10, 10)))
    cnn.add_layer(L("out", "Relu", ["add"], (1, 2, 10, 10)))
    return cnn


def test_residual_join_skew():
    """The skip edge waits for two 3x3 convs: it holds 3 rows where an element-wise
    consumer alone would hold 1 (Equation 5's bound)."""
    cnn = residual()
    a = analyse_partition(cnn, cnn.order(), {n: 10 for n in cnn.order()})
    assert a.edge_rows == {("in", "c1"): 3, ("in", "add"): 3, ("c1", "c2"): 3,
                           ("c2", "add"): 1, ("add", "out"): 1}
    assert brute_force_rows(cnn, a) == a.edge_rows
    whole = analyse_partition(cnn, cnn.order(), {})
    assert whole.firings == cnn.order()
    assert set(whole.edge_rows.values()) == {10}


def test_concat_reads_every_input_row_by_row():
    cnn = CNN("cat")
    cnn.add_layer(L("in", "Input", [], (1, 2, 6, 6)))
    cnn.add_layer(conv("a", "in", (1, 3, 6, 6)))
    cnn.add_layer(conv("b", "in", (1, 1, 6, 6), k=1, top=0))
    cnn.add_layer(L("cat", "Concat", ["a", "b"], (1, 4, 6, 6), axis=1))
    a = analyse_partition(cnn, cnn.order(), {n: 6 for n in cnn.order()})
    assert a.graph.channel("b->cat").cons == [1] * 6
    assert a.graph.channel("a->cat").cons == [1] * 6
    # demand-driven: the 1x1 branch runs only when the concat needs its row, so both inputs
    # of the concat hold one row; the 3x3 branch's window holds 3 input rows
    assert a.edge_rows == {("in", "a"): 3, ("in", "b"): 1, ("a", "cat"): 1, ("b", "cat"): 1}
    assert brute_force_rows(cnn, a) == a.edge_rows
    whole = analyse_partition(cnn, cnn.order(), {})
    assert whole.firings == ["in", "a", "b", "cat"]


def test_whole_layer_between_parts_segments():
    cnn = CNN("seg")
    cnn.add_layer(L("in", "Input", [], (1, 2, 8, 8)))
    cnn.add_layer(conv("c1", "in", (1, 2, 8, 8)))
    cnn.add_layer(conv("c2", "c1", (1, 3, 8, 8)))
    cnn.add_layer(conv("c3", "c2", (1, 2, 8, 8)))
    cnn.add_layer(conv("c4", "c3", (1, 2, 8, 8)))
    phases = {"in": 8, "c1": 8, "c2": 1, "c3": 8, "c4": 8}
    a = analyse_partition(cnn, cnn.order(), phases)
    k = a.firings.index("c2")
    assert sorted(a.firings[:k]) == sorted(["in"] * 8 + ["c1"] * 8)
    assert a.firings.count("c2") == 1 and set(a.firings[k + 1:]) == {"c3", "c4"}
    assert a.edge_rows == {("in", "c1"): 3, ("c1", "c2"): 8, ("c2", "c3"): 8, ("c3", "c4"): 3}
    assert a.edge_elements[("c2", "c3")] == 3 * 8 * 8
    assert brute_force_rows(cnn, a) == a.edge_rows
    assert a.firings[:3] == ["in", "in", "c1"]       # the 3x3 'same' window needs 2 rows
    assert a.edge_steps[("c1", "c2")] == (2, k)   # from c1's first row to c2's firing


def test_squeeze_excite_broadcast_and_partition_inputs():
    """The 1-row SE scale is read by every phase of the Mul; an input from outside the
    partition (here `in`) is not a channel."""
    cnn = CNN("se")
    cnn.add_layer(L("in", "Input", [], (1, 4, 6, 6)))
    cnn.add_layer(conv("c", "in", (1, 4, 6, 6)))
    cnn.add_layer(L("gap", "GlobalAveragePool", ["c"], (1, 4, 1, 1)))
    cnn.add_layer(L("fc", "Conv", ["gap"], (1, 4, 1, 1), kernel_shape=[1, 1], strides=[1, 1],
                    pads=[0, 0, 0, 0]))
    cnn.add_layer(L("mul", "Mul", ["c", "fc"], (1, 4, 6, 6)))
    layers = ["c", "gap", "fc", "mul"]
    a = analyse_partition(cnn, layers, {"c": 6, "gap": 1, "fc": 1, "mul": 6})
    assert [c.name for c in a.graph.channels] == ["c->gap", "c->mul", "gap->fc", "fc->mul"]
    assert a.graph.channel("fc->mul").cons == [1, 0, 0, 0, 0, 0]
    # the Mul can start only after the whole of c went through gap: c->mul holds all 6 rows
    assert a.edge_rows == {("c", "gap"): 6, ("c", "mul"): 6, ("gap", "fc"): 1,
                           ("fc", "mul"): 1}
    assert brute_force_rows(cnn, a) == a.edge_rows


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(0, 2),
                          st.integers(1, 2), st.booleans()), min_size=1, max_size=4),
       st.integers(6, 14), st.booleans())
def test_random_chains_match_brute_force(specs, height, skip):
    """Chains of convs (kernel, stride, pad, dilation, by parts?) with an optional
    residual Add over the last layer."""
    cnn = CNN("rand")
    cnn.add_layer(L("in", "Input", [], (1, 1, height, 3)))
    prev, h, phases = "in", height, {"in": height}
    for i, (k, s, pad, d, parts) in enumerate(specs):
        pad = min(pad, (k - 1) * d)
        out = (h + 2 * pad - (k - 1) * d - 1) // s + 1
        if out < 1:
            break
        name = f"c{i}"
        cnn.add_layer(conv(name, prev, (1, 1, out, 3), k=k, s=s, top=pad, d=d))
        phases[name] = out if parts else 1
        prev, h = name, out
    if skip and prev != "in":
        src = cnn.layer(prev).inputs[0]
        if cnn.layer(src).output_shape[2] == h:
            cnn.add_layer(L("add", "Add", [prev, src], (1, 1, h, 3)))
            phases["add"] = h
    a = analyse_partition(cnn, cnn.order(), phases)
    assert brute_force_rows(cnn, a) == a.edge_rows
    assert a.firing_counts == {n: phases[n] for n in cnn.order()}


def test_xml_round_trip_and_sdf3_example(tmp_path):
    """The XML written for a partition reads back with equal rates and token sizes."""
    from sdf3.xml import read_xml, write_xml

    cnn = residual()
    g = to_csdf(cnn, cnn.order(), {n: 10 for n in cnn.order()}, self_loops=True)
    write_xml(g, tmp_path / "res.xml")
    back = read_xml(tmp_path / "res.xml")
    assert {a.name: a.phases for a in back.actors.values()} == {n: 10 for n in cnn.order()}
    assert ({c.name: (c.src, c.dst, c.prod, c.cons, c.initial_tokens, c.token_size)
             for c in back.channels}
            == {c.name: (c.src, c.dst, c.prod, c.cons, c.initial_tokens, c.token_size)
                for c in g.channels})


def test_rates_equal_sdf3_example1_file():
    from sdf3.xml import read_xml

    cnn = CNN("ex1")
    cnn.add_layer(L("in", "Input", [], (1, 1, 5, 5)))
    cnn.add_layer(conv("conv", "in", (1, 1, 5, 5), k=3, top=0, bottom=2))
    ours = to_csdf(cnn, ["in", "conv"], {"in": 5, "conv": 5}).channel("in->conv")
    ex1 = read_xml(DATA / "sdf3" / "ex1_conv3x3.xml").channel("in2conv")
    assert (ours.prod, ours.cons) == (ex1.prod, ex1.cons)


def _peak(a):
    """Most elements live at one step if every edge held its size over its whole span:
    what Algorithm 1 sees (lifetimes x sizes)."""
    return max(sum(a.edge_elements[e] for e, (first, last) in a.edge_steps.items()
                   if first <= t <= last) for t in range(len(a.firings)))


@pytest.mark.parametrize("height,depth,parts_win", [(4, 6, False), (32, 3, True)])
def test_all_parts_is_not_always_the_minimum(height, depth, parts_win):
    """Deep chains of short tensors: edges by parts all live through the pipeline, so their
    sum exceeds what whole layers (two tensors at a time) need; tall tensors favour parts."""
    cnn = CNN("deep")
    cnn.add_layer(L("in", "Input", [], (1, 1, height, 1)))
    prev = "in"
    for i in range(depth):
        cnn.add_layer(conv(f"c{i}", prev, (1, 1, height, 1)))
        prev = f"c{i}"
    parts = analyse_partition(cnn, cnn.order(), {n: height for n in cnn.order()})
    whole = analyse_partition(cnn, cnn.order(), {})
    assert brute_force_rows(cnn, parts) == parts.edge_rows
    assert _peak(whole) == 2 * height           # a layer's input and output, nothing else
    assert (_peak(parts) < _peak(whole)) == parts_win


def concat_net():
    cnn = CNN("cat")
    cnn.add_layer(L("in", "Input", [], (1, 2, 6, 6)))
    cnn.add_layer(conv("a", "in", (1, 3, 6, 6)))
    cnn.add_layer(conv("b", "in", (1, 1, 6, 6), k=1, top=0))
    cnn.add_layer(L("cat", "Concat", ["a", "b"], (1, 4, 6, 6), axis=1))
    return cnn


@pytest.mark.parametrize("make,chain", [(chain_stride2, True), (residual, False),
                                        (concat_net, False)])
def test_schedule_against_sdf3_generic_scheduler(make, chain):
    """Our CNN scheduler agrees with sdf3's generic min_buffer_schedule on a chain, and
    never needs more real rows than its schedule does elsewhere (both checked by brute
    force)."""
    from csdf.partition_analysis import phase_numbers, row_buffers
    from csdf.to_csdf import edge_windows
    from sdf3.schedule import min_buffer_schedule

    cnn = make()
    phases = {n: cnn.layer(n).output_shape[2] for n in cnn.order()}
    a = analyse_partition(cnn, cnn.order(), phases)
    generic = min_buffer_schedule(a.graph).actors()
    rows, _ = row_buffers(a.graph, edge_windows(cnn, a.layers, a.phases), generic)
    replay = SimpleNamespace(phases=a.phases, layers=a.layers, firings=generic,
                             phase_of_firing=phase_numbers(generic))
    assert brute_force_rows(cnn, replay) == rows
    if chain:
        assert generic == a.firings
    assert sum(a.edge_rows.values()) <= sum(rows.values())
    assert sorted(generic) == sorted(a.firings)


APPS = Path(__file__).resolve().parents[2] / "apps"


def test_explore_csdf_worked_example(tmp_path, capsys):
    """Table 10's chromosome (l3, l4, l5 of CNN1 by parts) gives the paper's schedule
    {l1}, {l2}, [{l3}, {l4}, {l5}] x 32; the XML of every partition reads back."""
    import json

    from explorer.cli.main import main
    from sdf3.xml import read_xml

    out = tmp_path / "csdf"
    args = ["csdf", str(APPS / "worked_example.yaml"), "--parts", "CNN1.l3,CNN1.l4,CNN1.l5",
            "--out", str(out), "--json"]
    assert main(args) == 0
    report = json.loads(capsys.readouterr().out)["partitions"]
    p1 = report["CNN1.P1"]
    assert expand(p1["schedule"]) == ["l1", "l2"] + ["l3", "l4", "l5"] * 32
    assert p1["firings"] == {"l1": 1, "l2": 1, "l3": 32, "l4": 32, "l5": 32}
    # whole l2 -> by-parts l3: the whole tensor; by parts on both ends: one row (C x W)
    assert p1["buffers"] == {"l1->l2": 3 * 32 * 32, "l2->l3": 8 * 32 * 32,
                             "l2->l4": 8 * 32 * 32, "l3->l4": 8 * 32, "l4->l5": 16 * 32}
    assert report["CNN2.P2"]["buffers"] == {"l1->l2": 3072}
    assert sorted(p.name for p in out.iterdir()) == ["CNN1.P1.xml", "CNN2.P2.xml",
                                                     "CNN2.P3.xml"]
    g = read_xml(out / "CNN1.P1.xml")
    assert g.channel("l3->l4").prod == [1] * 32 and g.channel("l2->l3").prod == [32]
    assert g.channel("l3->l3").initial_tokens == 1
    assert main(args) == 2                                 # --out not empty
    assert "not empty" in capsys.readouterr().err
    assert main(args[:3] + ["l9"] + args[4:] + ["--force"]) == 2
    assert "'l9'" in capsys.readouterr().err

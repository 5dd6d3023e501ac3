"""Parts of k output rows per phase: CSDF rates, schedule, real row buffers, SDF3 XML.

Buffer sizes for k > 1 are checked against a replay written here from the definitions:
part p of a layer of height H in Φ phases writes rows [p*k, (p+1)*k) with k = ceil(H/Φ);
it reads the slab of rows from its first output row's first window row to its last output
row's last window row (a part of one row: exactly that row's window taps); a buffer holds a row from the start of the producer firing that
writes it until the end of the consumer phase after which neither it nor an earlier row
is read again. A ring is then rounded up to whole parts of its producer (k_src rows), so
that every part lands in consecutive slots. The k = 1 figures are the paper's (Figure 3) and
the worked example's.
"""
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from csdf.model import CNN, Layer
from csdf.partition_analysis import analyse_partition
from csdf.parts import phases_for_rows, valid_phases
from csdf.to_csdf import to_csdf
from sdf3.errors import InputError

APPS = Path(__file__).resolve().parents[2] / "apps"


def L(name, op, inputs, shape, **hyper):
    return Layer(name, op, hyper, inputs=inputs, output_shape=shape)


def conv(name, src, shape, k=3, s=1, top=1, d=1):
    return L(name, "Conv", [src], shape, kernel_shape=[k, k], strides=[s, s],
             pads=[top, 1, top, 1], dilations=[d, d], group=1)


def out_rows(height, phases, p):
    k = -(-height // phases)
    return set(range(p * k, min(height, (p + 1) * k)))


def needs(cnn, phases, src, dst, p):
    """Input rows of src->dst that phase p of dst needs (and so must be present)."""
    height = cnn.edge_shape(src, dst)[2]
    layer = cnn.layer(dst)
    if phases[dst] == 1:
        return set(range(height))
    if height == 1:
        return {0}
    rows = out_rows(layer.output_shape[2], phases[dst], p)
    if layer.op == "Conv":
        k, s, d, pad = (layer.hyper["kernel_shape"][0], layer.hyper["strides"][0],
                        layer.hyper["dilations"][0], layer.hyper["pads"][0])
        if len(rows) == 1:       # one output row: exactly its window's taps
            return {min(rows) * s - pad + i * d for i in range(k)} & set(range(height))
        # a part model is fed the slab from its first output row's first window row to its
        # last output row's last window row (padding rows are not stored)
        return set(range(min(rows) * s - pad, max(rows) * s - pad + (k - 1) * d + 1)) & set(
            range(height))
    return rows


def replay(cnn, a):
    """Most rows each edge holds at once under a's schedule, from the definitions above."""
    phases, inside = a.phases, set(a.layers)
    edges = [(u, v) for u, v in cnn.graph.edges if u in inside and v in inside]
    live = {e: set() for e in edges}
    done = {name: -1 for name in a.layers}
    most = {e: 0 for e in edges}
    for name, p in zip(a.firings, a.phase_of_firing):
        assert p == done[name] + 1
        for e in edges:
            if e[0] == name:
                live[e] |= out_rows(cnn.edge_shape(*e)[2], phases[name], p)
        for e in edges:
            if e[1] == name:
                need = needs(cnn, phases, *e, p)
                assert need <= live[e], f"{e}: phase {p} misses rows {need - live[e]}"
            most[e] = max(most[e], len(live[e]))
        done[name] = p
        for e in edges:
            later = set().union(*(needs(cnn, phases, *e, q)
                                  for q in range(done[e[1]] + 1, phases[e[1]])))
            for r in sorted(live[e]):
                if any(x <= r for x in later):
                    break
                live[e].discard(r)
    assert all(not rows for rows in live.values())
    for src, dst in edges:                 # whole parts of the producer, at most the height
        h = cnn.edge_shape(src, dst)[2]
        k = -(-h // phases[src])
        if 1 < k and most[(src, dst)] < h:
            most[(src, dst)] = min(h, -(-most[(src, dst)] // k) * k)
    return most


def figure3(top=2):
    cnn = CNN("CNN1")
    cnn.add_layer(L("l1", "Input", [], (1, 3, 32, 32)))
    cnn.add_layer(conv("l2", "l1", (1, 8, 32, 32), k=5, top=top))
    return cnn


def test_figure3_at_k1_is_the_papers_480():
    cnn = figure3()
    a = analyse_partition(cnn, ["l1", "l2"], {**phases_for_rows(cnn, {"l2": 1}), "l1": 32})
    assert a.edge_elements == {("l1", "l2"): 480}
    assert replay(cnn, a) == a.edge_rows


@pytest.mark.parametrize("k,rows", [(2, 6), (4, 12), (8, 24), (16, 32), (32, 32)])
def test_figure3_with_k_rows_per_phase(k, rows):
    """A 5x5 'same' window over a part of k rows reads k + 4 input rows (k*stride + halo):
    rows pk-2 .. pk+k+1. The input arrives in parts of k rows too, so the buffer holds from
    row pk-2 to the end of the input part holding row pk+k+1: k + 2 + k*ceil(2/k) rows
    (6, 10, 18), rounded up to whole input parts: 6, 12, 24."""
    cnn = figure3()
    ph = {"l1": 32 // k, "l2": 32 // k}
    a = analyse_partition(cnn, ["l1", "l2"], ph)
    assert a.graph.channel("l1->l2").prod == [k] * (32 // k)
    assert a.firing_counts == {"l1": 32 // k, "l2": 32 // k}
    assert a.edge_rows == {("l1", "l2"): min(32, rows)}
    assert a.edge_elements == {("l1", "l2"): min(32, rows) * 96}
    assert replay(cnn, a) == a.edge_rows


def test_last_part_is_shorter():
    """H = 10 in 4 phases: k = 3, parts 3, 3, 3, 1; rates and reads follow."""
    cnn = CNN("c")
    cnn.add_layer(L("in", "Input", [], (1, 1, 10, 4)))
    cnn.add_layer(conv("a", "in", (1, 2, 10, 4)))
    cnn.add_layer(L("r", "Relu", ["a"], (1, 2, 10, 4)))
    a = analyse_partition(cnn, cnn.order(), {"in": 10, "a": 4, "r": 2})
    assert a.graph.channel("a->r").prod == [3, 3, 3, 1]
    assert a.graph.channel("a->r").cons == [5, 5]
    # conv part p reads rows 3p-1 .. 3p+3: newly reached 4, 3, 3, 0
    assert a.graph.channel("in->a").cons == [4, 3, 3, 0]
    assert replay(cnn, a) == a.edge_rows
    assert a.edge_rows[("a", "r")] == 6        # r's first part needs rows 0-4: two parts of a


def test_invalid_phase_counts_are_refused():
    """6 phases over 10 rows would leave one empty (k = 2 gives 5): one clear line."""
    assert [n for n in range(1, 11) if valid_phases(10, n)] == [1, 2, 3, 4, 5, 10]
    cnn = CNN("c")
    cnn.add_layer(L("in", "Input", [], (1, 1, 10, 4)))
    cnn.add_layer(conv("a", "in", (1, 2, 10, 4)))
    with pytest.raises(InputError, match="layer a: expected 1 to 10 phases"):
        analyse_partition(cnn, cnn.order(), {"a": 6})
    with pytest.raises(InputError, match="rows per phase must be >= 1"):
        phases_for_rows(cnn, {"a": 0})
    assert phases_for_rows(cnn, {"a": 3, "in": 2}) == {"in": 1, "a": 4}   # Input: no gene


def test_residual_block_in_parts_of_two():
    cnn = CNN("res")
    cnn.add_layer(L("in", "Input", [], (1, 2, 10, 10)))
    cnn.add_layer(conv("c1", "in", (1, 2, 10, 10)))
    cnn.add_layer(conv("c2", "c1", (1, 2, 10, 10)))
    cnn.add_layer(L("add", "Add", ["c2", "in"], (1, 2, 10, 10)))
    cnn.add_layer(L("out", "Relu", ["add"], (1, 2, 10, 10)))
    a = analyse_partition(cnn, cnn.order(), {n: 5 for n in cnn.order()})
    assert replay(cnn, a) == a.edge_rows
    ones = analyse_partition(cnn, cnn.order(), {n: 10 for n in cnn.order()})
    # coarser parts never hold fewer rows than row by row, never more than whole
    assert all(ones.edge_rows[e] <= a.edge_rows[e] <= 10 for e in a.edge_rows)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3), st.integers(0, 2),
                          st.integers(1, 2), st.integers(1, 6)), min_size=1, max_size=4),
       st.integers(6, 17), st.integers(1, 6), st.booleans())
def test_random_chains_with_k_rows_match_the_replay(specs, height, k_in, skip):
    """Chains of convs (kernel, stride, pad, dilation, rows per phase; 6 = whole) with an
    optional residual Add: the analysis' rows equal the replay's."""
    cnn = CNN("rand")
    cnn.add_layer(L("in", "Input", [], (1, 1, height, 3)))
    prev, h, rows = "in", height, {}
    phases = {"in": -(-height // k_in)}
    for i, (k, s, pad, d, kr) in enumerate(specs):
        pad = min(pad, (k - 1) * d)
        out = (h + 2 * pad - (k - 1) * d - 1) // s + 1
        if out < 1:
            break
        name = f"c{i}"
        cnn.add_layer(conv(name, prev, (1, 1, out, 3), k=k, s=s, top=pad, d=d))
        rows[name] = out if kr == 6 else kr
        prev, h = name, out
    if skip and prev != "in":
        src = cnn.layer(prev).inputs[0]
        if cnn.layer(src).output_shape[2] == h:
            cnn.add_layer(L("add", "Add", [prev, src], (1, 1, h, 3)))
            rows["add"] = 2
    phases.update({n: v for n, v in phases_for_rows(cnn, rows).items() if n != "in"})
    a = analyse_partition(cnn, cnn.order(), phases)
    assert replay(cnn, a) == a.edge_rows
    assert a.firing_counts == {n: phases[n] for n in cnn.order()}
    for ch in a.graph.channels:
        assert sum(ch.prod) == sum(ch.cons) == cnn.edge_shape(ch.src, ch.dst)[2]


def test_sdf3_xml_carries_k_row_rates(tmp_path):
    from sdf3.xml import read_xml, write_xml

    cnn = figure3()
    g = to_csdf(cnn, ["l1", "l2"], {"l1": 8, "l2": 8}, self_loops=True)
    write_xml(g, tmp_path / "f3.xml")
    back = read_xml(tmp_path / "f3.xml")
    assert back.channel("l1->l2").prod == [4] * 8
    # part p of the conv reads rows 4p-2 .. 4p+5: newly reached 6, 4, ..., 4, 0
    assert back.channel("l1->l2").cons == [6] + [4] * 6 + [2]
    assert back.actors["l2"].phases == 8


def test_worked_example_unchanged_at_k1():
    """Table 10's chromosome as rows per phase 1 gives the paper's P1 schedule and sizes."""
    from explorer.app.appfile import load_app
    from sdf3.notation import expand

    app = load_app(APPS / "worked_example.yaml")
    cnn = app.cnns["CNN1"]
    part = next(p for p in app.partitions if p.name == "CNN1.P1")
    ph = phases_for_rows(cnn, {"l3": 1, "l4": 1, "l5": 1})
    a = analyse_partition(cnn, part.layers, ph)
    assert expand(a.schedule) == ["l1", "l2"] + ["l3", "l4", "l5"] * 32
    assert a.edge_elements[("l3", "l4")] == 8 * 32
    assert a.edge_elements[("l4", "l5")] == 16 * 32


def test_explore_csdf_with_rows_per_phase(tmp_path, capsys):
    """`--parts LAYER:K` runs K rows per phase: 8 firings of 4 rows over CNN1's 32 rows,
    and the XML carries rates of 4; a K that is not a positive integer exits 2."""
    import json

    from explorer.cli.main import main
    from sdf3.xml import read_xml

    out = tmp_path / "csdf"
    args = ["csdf", str(APPS / "worked_example.yaml"), "--parts", "CNN1.l3:4,CNN1.l4:4,CNN1.l5",
            "--rows", "4", "--out", str(out), "--json"]
    assert main(args) == 0
    p1 = json.loads(capsys.readouterr().out)["partitions"]["CNN1.P1"]
    assert p1["firings"] == {"l1": 1, "l2": 1, "l3": 8, "l4": 8, "l5": 8}
    assert p1["buffers"]["l3->l4"] == 4 * 8 * 32
    g = read_xml(out / "CNN1.P1.xml")
    assert g.channel("l3->l4").prod == [4] * 8
    assert main(args[:3] + ["CNN1.l3:0"] + args[4:] + ["--force"]) == 2
    assert "expected LAYER:K" in capsys.readouterr().err

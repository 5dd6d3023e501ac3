"""Baselines: Pisarchyk & Lee's greedy by size against the reference implementation's
published cases, the paper's MobileNetV2 figures (Table 12, app 1), the lower bound of the
worked example by hand, and the `explore baselines` command."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from explorer.app.appfile import load_app
from explorer.report.baselines import all_parts_inputs, baselines, greedy_by_size, lower_bound, pisarchyk, sequential_uses
from explorer.cli.main import main
from explorer.memory.lifetimes import EdgeUse, Rows, edge_uses
from explorer.memory.reuse import algorithm1
from explorer.memory.validity import check_plan
from conftest import data_path

ROOT = Path(__file__).resolve().parents[3]
APPS = ROOT / "apps"
MIB = 2 ** 20


def test_greedy_by_size_matches_tflite_reference_cases():
    """Expected assignments of TFLite GPU's memory_management_test.cc, GREEDY_BY_SIZE
    (the shared-objects algorithm of Pisarchyk & Lee); records are (size, first, last)."""
    chain = [(16, 0, 1), (8, 1, 2), (64, 2, 3), (32, 3, 4), (8, 4, 5)]
    assert greedy_by_size(chain) == ([0, 1, 0, 1, 0], [64, 32])
    complex_ = [(32, 0, 1), (32, 1, 4), (8, 2, 5), (16, 3, 5), (8, 4, 5), (64, 5, 7),
                (8, 6, 8), (8, 7, 8), (16, 8, 9)]
    assert greedy_by_size(complex_) == ([1, 0, 2, 1, 3, 0, 1, 2, 0], [64, 32, 8, 8])
    assert greedy_by_size([(16, 0, 1)]) == ([0], [16])
    assert greedy_by_size([]) == ([], [])


def test_worked_example_lower_bound_by_hand():
    """P1 at step 4 (1-based) holds e24, e34, e45 = 8,192 + 8,192 + 16,384; the pipeline set
    holds at most both copies of e23 + e12 + e34 = 15,626; sets never run together."""
    app = load_app(APPS / "worked_example.yaml")
    app.placement = "shared-objects"
    assert lower_bound(edge_uses(app), app.pipelines) == (32768, 3)
    rows = baselines(app)
    assert rows["lower_bound"].buffer_bytes == 32768 * 4
    assert rows["none"].buffer_bytes == 59658 * 4
    assert rows["reuse"].buffer_bytes == 32778 * 4


def test_worked_example_pisarchyk_per_cnn_by_hand():
    """CNN2 made sequential: e12 [0,1], e23 [1,2], e34 [2,3]: objects {e23}=6,272 and
    {e12, e34}=3,072. CNN1: positional maximums [16384, 8192, 8192]; e45 opens object 0,
    e23 joins it (distance 1), e24 and e34 each open one, e12 joins e34's (distance 1)."""
    app = load_app(APPS / "worked_example.yaml")
    seq = sequential_uses(app)
    assert [u.spans for u in seq["CNN2"]] == [(("CNN2.sequential", 0, 1),),
                                              (("CNN2.sequential", 1, 2),),
                                              (("CNN2.sequential", 2, 3),)]
    buffers = pisarchyk(seq)
    cnn2 = [b for b in buffers if b.edges[0].startswith("CNN2")]
    assert sorted((sorted(b.edges), b.size) for b in cnn2) == [
        (["CNN2.l1->l2", "CNN2.l3->l4"], 3072), (["CNN2.l2->l3"], 6272)]
    cnn1 = [b for b in buffers if b.edges[0].startswith("CNN1")]
    assert [(sorted(b.edges), b.size) for b in cnn1] == [
        (["CNN1.l2->l3", "CNN1.l4->l5"], 16384), (["CNN1.l2->l4"], 8192),
        (["CNN1.l1->l2", "CNN1.l3->l4"], 8192)]
    assert all(len({e.split(".")[0] for e in b.edges}) == 1 for b in buffers)
    assert sum(b.size for b in buffers) == 16384 + 8192 * 2 + 3072 + 6272
    for cnn, uses in seq.items():
        mine = [b for b in buffers if b.edges[0].startswith(cnn)]
        assert check_plan(uses, mine, [[f"{cnn}.sequential"]]) == []


@pytest.fixture(scope="module")
def mobilenet():
    return load_app(APPS / "table12_app1_mobilenet_v2.yaml")


def test_mobilenet_v2_pisarchyk_reproduces_the_paper(mobilenet):
    paper = yaml.safe_load(data_path("paper", "table12.yaml").read_text())["apps"][1]["memory"]
    rows = baselines(mobilenet, with_all_parts=False)
    cnn = mobilenet.cnns["mobilenet_v2"]
    whole = sum(cnn.edge_elements(u, v) for u, v in cnn.graph.edges)
    assert rows["none"].param_bytes == cnn.param_count * 4
    assert rows["none"].buffer_bytes == whole * 4
    assert abs(rows["pisarchyk"].total_bytes / MIB - paper["pisarchyk"]) <= 0.01 * paper["pisarchyk"]
    assert rows["reuse"].total_bytes <= rows["pisarchyk"].total_bytes
    assert rows["lower_bound"].total_bytes <= rows["reuse"].total_bytes
    uses = edge_uses(mobilenet)
    assert check_plan(uses, algorithm1(uses, mobilenet.pipelines), mobilenet.pipelines) == []


def test_mobilenet_v2_offsets_reach_the_bound_of_their_schedule():
    """Shared objects (Algorithm 1) cost 6.70 MiB of buffers where 5.74 MiB are
    alive at once; offsets come within 2% of that bound (here: on it), and never below."""
    app = load_app(APPS / "table12_app1_mobilenet_v2.yaml")
    paper = baselines(replace(app, placement="shared-objects"), with_all_parts=False)
    assert round(paper["reuse"].total_bytes / MIB, 2) == 20.00             # docs/memory.md
    assert round(paper["reuse"].buffer_bytes / MIB, 2) == 6.70
    rows = baselines(app)
    bound = rows["lower_bound"].buffer_bytes
    assert bound <= rows["reuse"].buffer_bytes <= 1.02 * bound
    assert rows["all_parts_bound"].buffer_bytes <= rows["all_parts"].buffer_bytes
    assert rows["reuse"].buffer_bytes < paper["reuse"].buffer_bytes


def test_pisarchyk_is_blind_to_pipelines():
    """App 3 (pipelined MobileNetV2): Pisarchyk sees the sequential CNN, so it gives app 1's
    figure (the paper: 20.32 MB both) and shares buffers between the two pipelined stages,
    which Algorithm 1 never does."""
    app1 = load_app(APPS / "table12_app1_mobilenet_v2.yaml")
    app3 = load_app(APPS / "table12_app3_mobilenet_v2_pipelined.yaml")
    b1 = pisarchyk(sequential_uses(app1))
    b3 = pisarchyk(sequential_uses(app3))
    assert [b.size for b in b1] == [b.size for b in b3]
    head = set(app3.partition("mobilenet_v2.head").layers)

    def stages(buf):
        return {e.split(".", 1)[1].split("->")[0] in head for e in buf.edges}

    assert any(stages(b) == {True, False} for b in b3)
    uses = edge_uses(app3)
    reuse = algorithm1(uses, app3.pipelines)
    assert not any(stages(b) == {True, False} for b in reuse)
    assert check_plan(uses, reuse, app3.pipelines) == []


def test_all_parts_plan_is_valid_and_smaller_per_edge():
    app = load_app(APPS / "worked_example.yaml")
    schedules, sizes = all_parts_inputs(app)
    uses = edge_uses(app, schedules, sizes)
    whole = {u.name: u.size for u in edge_uses(app)}
    assert all(u.size <= whole[u.name] for u in uses)
    # l3 is row-wise by parts: e23 holds one row of 8 channels x 32 columns; the Input layer
    # l1 cannot go by parts, so e12 stays whole
    assert sizes["CNN1.l2->l3"] == 8 * 32
    assert sizes["CNN1.l1->l2"] == whole["CNN1.l1->l2"] == 3072
    assert check_plan(uses, algorithm1(uses, app.pipelines), app.pipelines) == []


def test_cli_json_and_table(capsys):
    paper = ["--placement", "shared-objects"]
    assert main(["baselines", str(APPS / "worked_example.yaml"), "--json"] + paper) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["none", "pisarchyk", "all_parts", "reuse", "lower_bound"]
    assert out["none"] == {"total_bytes": 238632, "param_bytes": 0, "buffer_bytes": 238632, "buffers": 9}
    assert out["reuse"]["buffer_bytes"] == 32778 * 4 and out["reuse"]["buffers"] == 4
    # offsets (the default): reuse reaches its schedule's bound, 32,768 by hand (above)
    assert main(["baselines", str(APPS / "worked_example.yaml"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["none", "pisarchyk", "all_parts", "all_parts_bound", "reuse", "lower_bound"]
    assert out["reuse"]["buffer_bytes"] == out["lower_bound"]["buffer_bytes"] == 32768 * 4
    assert out["all_parts"]["buffer_bytes"] >= out["all_parts_bound"]["buffer_bytes"]
    assert main(["baselines", str(APPS / "worked_example.yaml"), "--precision", "fp16"] + paper) == 0
    text = capsys.readouterr().out
    assert "65,556" in text and "119,316" in text          # 32,778 x 2 and 59,658 x 2


def test_cli_bad_input_exits_2(tmp_path, capsys):
    assert main(["baselines", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err


def plain_lower_bound(uses, pipelines):
    """The bound by its definition, step by step: the reference of lower_bound's sweep."""
    best = (0, 0)
    listed = {name for group in pipelines for name in group}
    alone = sorted({s[0] for u in uses for s in u.spans} - listed)
    for members in list(pipelines) + [[name] for name in alone]:
        total, count = 0, 0
        steps = {p: {} for p in members}
        for use in uses:
            mine = [s for s in use.spans if s[0] in set(members)]
            if not mine:
                continue
            if len({s[0] for s in mine}) > 1:
                total, count = total + use.size, count + 1
                continue
            p, a, b = mine[0]
            one = use.rows is not None and len(use.spans) == 1
            for t in range(a, b + 1):
                n = use.alive(t) if one else use.size
                if n:
                    e, c = steps[p].get(t, (0, 0))
                    steps[p][t] = (e + n, c + 1)
        for p in members:
            e, c = max(steps[p].values(), default=(0, 0))
            total, count = total + e, count + c
        best = max(best, (total, count))
    return best


@st.composite
def edge_use_sets(draw):
    """Uses over partitions a, b (one pipeline set) and c (alone), some across two, some
    whole tensors stored by rows (nondecreasing first and last steps per row)."""
    out = []
    for i in range(draw(st.integers(1, 12))):
        parts = draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=2, unique=True))
        spans = []
        for p in parts:
            a = draw(st.integers(0, 30))
            spans.append((p, a, a + draw(st.integers(-1, 30))))
        rows = None
        if len(spans) == 1 and draw(st.booleans()):
            k = draw(st.integers(1, 6))
            first = sorted(draw(st.lists(st.integers(0, 60), min_size=k, max_size=k)))
            last = sorted(f + draw(st.integers(0, 20)) for f in first)
            rows = Rows(draw(st.integers(1, 9)), tuple(first), tuple(last))
        out.append(EdgeUse(f"e{i}", "x", draw(st.integers(0, 500)), tuple(spans), rows))
    return out


@settings(max_examples=150, deadline=None)
@given(edge_use_sets())
def test_lower_bound_sweep_equals_the_step_by_step_definition(uses):
    assert lower_bound(uses, [["a", "b"]]) == plain_lower_bound(uses, [["a", "b"]])
    assert lower_bound(uses, []) == plain_lower_bound(uses, [])

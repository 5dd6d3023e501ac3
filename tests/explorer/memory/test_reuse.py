"""The memory model and Algorithm 1 against the paper's worked example (Tables 1, 8, 9),
read from tests/data/paper/worked_example.yaml, plus the lifetime rules and the plan check."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from csdf.synthetic import build_synthetic
from explorer.app.model import Application, Partition, PRECISIONS
from explorer.app.appfile import load_app
from explorer.memory.lifetimes import EdgeUse, conflict, edge_uses, group_index
from explorer.memory.buffers import Buffer, memory_bytes, naive
from explorer.memory.reuse import algorithm1
from explorer.memory.validity import check_plan
from conftest import data_path

ROOT = Path(__file__).resolve().parents[3]
P1_PHASES = ["l1", "l2"] + ["l3", "l4", "l5"] * 32      # {l1}, {l2}, [{l3}, {l4}, {l5}] x 32


def ours(paper_edge: str) -> str:
    """The paper's "CNN2.e23(1)" is our "CNN2.l2->l3(1)"."""
    m = re.fullmatch(r"(\w+)\.e(\d)(\d)(\(\d\))?", paper_edge)
    assert m, paper_edge
    return f"{m[1]}.l{m[2]}->l{m[3]}{m[4] or ''}"


@pytest.fixture(scope="module")
def paper() -> dict:
    return yaml.safe_load(data_path("paper", "worked_example.yaml").read_text())


@pytest.fixture(scope="module")
def app() -> Application:
    return load_app(ROOT / "apps" / "worked_example.yaml")


def as_table(buffers: list[Buffer]) -> list[tuple[list[str], int]]:
    return [(sorted(b.edges), b.size) for b in buffers]


def paper_table(rows: list[dict]) -> list[tuple[list[str], int]]:
    return [(sorted(ours(e) for e in r["edges"]), r["size"]) for r in rows]


def test_table1_naive(app, paper):
    uses = edge_uses(app)
    assert as_table(naive(uses)) == paper_table(paper["table1_naive"])
    assert sum(b.size for b in naive(uses)) == paper["table1_total"] == 59658


def test_intervals_of_the_text(app):
    """Paper: under P1's schedule e23 lives in steps [2,3] and e24 in [2,4] (1-based)."""
    spans = {u.name: u.spans for u in edge_uses(app)}
    assert spans["CNN1.l2->l3"] == (("CNN1.P1", 1, 2),)
    assert spans["CNN1.l2->l4"] == (("CNN1.P1", 1, 3),)
    # the pipeline edge: two copies, each over both partitions whole
    assert spans["CNN2.l2->l3(1)"] == spans["CNN2.l2->l3(2)"] == (("CNN2.P2", 0, 1), ("CNN2.P3", 0, 1))
    assert "CNN2.l2->l3" not in spans


def test_table8_algorithm1(app, paper):
    uses = edge_uses(app)
    buffers = algorithm1(uses, app.pipelines)
    assert as_table(buffers) == paper_table(paper["table8_reuse"])   # same buffers, same order
    assert sum(b.size for b in buffers) == paper["table8_total"] == 32778
    assert check_plan(uses, buffers, app.pipelines) == []


@pytest.mark.parametrize("e34", [1, 256, 3072])
def test_table9_with_phases(app, paper, e34):
    """Table 10's chromosome: l3, l4, l5 of CNN1 by parts; e45 = 256, e34 any size <= 3,072."""
    uses = edge_uses(app, {"CNN1.P1": P1_PHASES}, {"CNN1.l3->l4": e34, "CNN1.l4->l5": 256})
    spans = {u.name: u.spans[0] for u in uses}
    assert spans["CNN1.l2->l3"] == ("CNN1.P1", 1, 2 + 3 * 31)          # last l3 firing
    assert spans["CNN1.l4->l5"] == ("CNN1.P1", 3, 4 + 3 * 31)          # first l4 .. last l5
    buffers = algorithm1(uses, app.pipelines)
    assert as_table(buffers) == paper_table(paper["table9_reduced"])
    assert sum(b.size for b in buffers) == paper["table9_total"] == 19712
    assert check_plan(uses, buffers, app.pipelines) == []


def test_memory_bytes_equations(app):
    """Eq. 1-4: synthetic CNNs have no parameters; buffers x data_bytes per precision."""
    buffers = algorithm1(edge_uses(app), app.pipelines)
    assert memory_bytes(app, buffers) == (0, 32778 * 4, 32778 * 4)
    half = replace(app, precision=PRECISIONS["fp16"])
    assert memory_bytes(half, buffers) == (0, 32778 * 2, 32778 * 2)


def test_memory_bytes_counts_folded_parameters(tiny_onnx):
    """The tiny CNN (conftest): conv1 4x3x3x3 (+4 bias after BN folding), conv2 8x4x3x3+8,
    fc 10x8+10 = 524 stored parameters; mixed precision stores them as int8."""
    from csdf.onnx_import import load_onnx
    cnn = load_onnx(tiny_onnx, "tiny")
    expected = 4 * 27 + 4 + 8 * 36 + 8 + 80 + 10
    app = Application("t", {"tiny": cnn}, [Partition("tiny.all", "tiny", cnn.order())],
                      [["tiny.all"]], precision=PRECISIONS["mixed"])
    params, bufs, total = memory_bytes(app, [Buffer(["x"], 100)])
    assert (params, bufs, total) == (expected, 200, expected + 200)


def test_sequential_stages_share_across_sets(app):
    """CNN2's stages in different sets of J: e23 is one buffer, alive from l2 to the end of P2
    and from the start of P3 to l3; P3's e34 may then share with P2's e12 (walked by hand:
    B1 = e12, e34, CNN2.e12, CNN2.e34; B2 = e23, e45, CNN2.e23; B3 = e24)."""
    seq = replace(app, pipelines=[["CNN1.P1"], ["CNN2.P2"], ["CNN2.P3"]])
    uses = edge_uses(seq)
    spans = {u.name: u.spans for u in uses}
    assert spans["CNN2.l2->l3"] == (("CNN2.P2", 1, 1), ("CNN2.P3", 0, 0))
    buffers = algorithm1(uses, seq.pipelines)
    assert as_table(buffers) == [
        (sorted(["CNN1.l1->l2", "CNN1.l3->l4", "CNN2.l1->l2", "CNN2.l3->l4"]), 8192),
        (sorted(["CNN1.l2->l3", "CNN1.l4->l5", "CNN2.l2->l3"]), 16384),
        (["CNN1.l2->l4"], 8192)]
    assert check_plan(uses, buffers, seq.pipelines) == []


def test_skip_edge_over_a_middle_stage_is_kept_alive():
    """a -> b -> c -> d plus the skip a -> d, three sequential stages: the skip edge waits
    through the middle stage whole, so the middle stage's edge b->c may not share with it."""
    cnn = build_synthetic({"layers": ["a", "b", "c", "d"],
                           "edges": {"a->b": [1, 1, 4, 4], "b->c": [1, 2, 4, 4],
                                     "c->d": [1, 1, 4, 4], "a->d": [1, 1, 4, 4]}}, "S")
    parts = [Partition("S.x", "S", ["a", "b"]), Partition("S.y", "S", ["c"]),
             Partition("S.z", "S", ["d"])]
    app = Application("s", {"S": cnn}, parts, [["S.x"], ["S.y"], ["S.z"]])
    uses = {u.name: u for u in edge_uses(app)}
    assert uses["S.a->d"].spans == (("S.x", 0, 1), ("S.y", 0, 0), ("S.z", 0, 0))
    assert conflict(uses["S.a->d"], uses["S.b->c"], group_index(app.pipelines))


def test_visiting_order_and_explicit_schedules(app):
    """Partitions in app order, edges by producer step then consumer; a passed schedule
    wins over the app's own."""
    names = [u.name for u in edge_uses(app)]
    assert names == ["CNN1.l1->l2", "CNN1.l2->l3", "CNN1.l2->l4", "CNN1.l3->l4", "CNN1.l4->l5",
                     "CNN2.l1->l2", "CNN2.l2->l3(1)", "CNN2.l2->l3(2)", "CNN2.l3->l4"]
    other = {u.name: u.spans[0] for u in edge_uses(app, {"CNN1.P1": ["l1", "l2", "l4", "l3", "l5"]})}
    assert other["CNN1.l2->l4"] == ("CNN1.P1", 1, 2)


def test_check_plan_finds_violations(app):
    uses = edge_uses(app)
    good = algorithm1(uses, app.pipelines)
    # e12 and e23 of CNN1 are alive together at step 1
    bad = [Buffer(["CNN1.l1->l2", "CNN1.l2->l3"], 8192)] + [
        Buffer([n for n in b.edges if n not in ("CNN1.l1->l2", "CNN1.l2->l3")], b.size) for b in good]
    assert any("alive together" in p for p in check_plan(uses, bad, app.pipelines))
    small = [Buffer(list(b.edges), b.size - 1) for b in good]
    assert sum("does not fit" in p for p in check_plan(uses, small, app.pipelines)) == 4
    missing = good[:-1]
    assert check_plan(uses, missing, app.pipelines) == ["edge CNN2.l3->l4 is in no buffer"]
    # pipelined partitions: P2's e12 and P3's e34 may never share, whatever their steps
    assert any("CNN2.l1->l2 and CNN2.l3->l4" in p for p in
               check_plan(uses, [Buffer([u.name for u in uses], 16384)], app.pipelines))
    assert check_plan(uses, naive(uses), app.pipelines) == []


def test_conflict_rule_is_symmetric_and_parallel_blind_to_steps():
    group = group_index([["A", "B"], ["C"]])
    a = EdgeUse("a", "x", 1, (("A", 0, 0),))
    b = EdgeUse("b", "x", 1, (("B", 5, 5),))
    c = EdgeUse("c", "x", 1, (("C", 0, 9),))
    a2 = EdgeUse("a2", "x", 1, (("A", 1, 2),))
    assert conflict(a, b, group) and conflict(b, a, group)
    assert not conflict(a, c, group) and not conflict(b, c, group)
    assert not conflict(a, a2, group)
    assert conflict(a2, EdgeUse("a3", "x", 1, (("A", 2, 3),)), group)

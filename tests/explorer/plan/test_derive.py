"""DeriveApplicationWithReducedBufs (explorer.plan.derive) on the paper's worked example, and the
plan it builds: what deploy reads, and always valid buffers."""
from __future__ import annotations

from pathlib import Path

import pytest

from csdf.model import EdgeId, edge_name
from explorer.app.appfile import load_app
from explorer.plan.derive import Evaluation, derive, gene_labels, phases_of, plan_for, uniform_phases
from explorer.memory.lifetimes import conflict, group_index
from explorer.memory.buffers import Buffer
from explorer.plan.model import to_json
from explorer.plan.plan_file import from_json
from explorer.throughput.evaluator import make_evaluator
from sdf3.errors import InputError

ROOT = Path(__file__).resolve().parents[3]
WORKED = ROOT / "apps" / "worked_example.yaml"


@pytest.fixture(scope="module")
def app():
    """The paper's methodology (Algorithm 1, the paper's schedules): its figures are exact."""
    app = load_app(WORKED)
    app.placement = "shared-objects"
    return app


@pytest.fixture(scope="module", params=["shared-objects", "offsets"])
def any_app(request):
    app = load_app(WORKED)
    app.placement = request.param
    return app


def table10_genes(app) -> list[int]:
    """Table 10: CNN1's l3, l4, l5 by parts, nothing else."""
    return [int(g in ("CNN1.l3", "CNN1.l4", "CNN1.l5")) for g in gene_labels(app)]


def test_genes_are_the_layers_that_may_go_by_parts(app):
    # l1 of each CNN is the input (Table 2 keeps it whole); every other layer has a gene
    assert gene_labels(app) == ["CNN1.l2", "CNN1.l3", "CNN1.l4", "CNN1.l5",
                                "CNN2.l2", "CNN2.l3", "CNN2.l4"]
    ph = phases_of(app, table10_genes(app))
    assert ph == {"CNN1": {"l1": 1, "l2": 1, "l3": 32, "l4": 32, "l5": 32},
                  "CNN2": {"l1": 1, "l2": 1, "l3": 1, "l4": 1}}     # the paper's phases
    with pytest.raises(ValueError):
        phases_of(app, [0, 1])


def test_reuse_only_is_table8(app):
    d = derive(app, uniform_phases(app, False))
    assert sum(b.size for b in d.buffers) == 32778                  # Table 8 total
    assert d.buffer_bytes == 32778 * 4 and d.param_bytes == 0
    # the app's explicit schedules win when every layer fires once
    assert {n: v.firings for n, v in d.parts.items()} == app.schedules


def test_table10_chromosome_gives_table9(app):
    d = derive(app, phases_of(app, table10_genes(app)))
    assert d.parts["CNN1.P1"].firings == ["l1", "l2"] + ["l3", "l4", "l5"] * 32  # Table 9's schedule
    # e34 = 1 row of 8 channels x 32; e45 = 1 row of 16 x 32 (the paper prints 256 for B4
    # but its own Table 1 gives e45 16 channels, so one row holds 512)
    assert d.sizes[edge_name("CNN1", "l3", "l4")] == 8 * 32
    assert d.sizes[edge_name("CNN1", "l4", "l5")] == 16 * 32
    assert d.sizes[edge_name("CNN1", "l2", "l3")] == 8 * 32 * 32   # whole producer l2
    assert sorted(b.size for b in d.buffers) == [512, 3072, 8192, 8192]
    assert sum(b.size for b in d.buffers) == 19712 - 256 + 512      # Table 9, e45 corrected


def test_evaluation_is_memory_and_fps(app):
    evaluate = Evaluation(app, make_evaluator(app))
    mem, fps = evaluate(tuple(table10_genes(app)))
    assert mem == (19712 - 256 + 512) * 4
    assert set(fps) == {"CNN1", "CNN2"} and all(v > 0 for v in fps.values())
    slow = evaluate(tuple([1] * 7))[1]
    assert slow["CNN1"] < fps["CNN1"]           # more phases cost time


def _plan(app, genes):
    d = derive(app, phases_of(app, genes))
    return d, plan_for(app, d, {"CNN1": 1.0, "CNN2": 2.0}, True, genes)


@pytest.mark.parametrize("pick", ["zeros", "table10", "ones"])
def test_plan_is_valid_and_complete(any_app, tmp_path, pick):
    app = any_app
    genes = {"zeros": [0] * 7, "table10": table10_genes(app), "ones": [1] * 7}[pick]
    d, plan = _plan(app, genes)
    # every edge once; crossing edge of the pipeline doubled
    names = {str(e) for e in plan.edges}
    for cnn_name, cnn in app.cnns.items():
        for u, v in cnn.edges():
            if (cnn_name, u, v) == ("CNN2", "l2", "l3"):
                assert {edge_name("CNN2", u, v, 1), edge_name("CNN2", u, v, 2)} <= names
            else:
                assert edge_name(cnn_name, u, v) in names
    # sizes: each edge fits its buffer; buffers as big as their largest edge; bytes = elements x 4
    for name, e in plan.edges.items():
        n, c, h, w = e.shape
        assert e.elements == e.rows * n * c * w and 1 <= e.rows <= h
        assert e.elements <= plan.buffers[e.buffer].elements
        assert name in plan.buffers[e.buffer].edges
    for b in plan.buffers:
        assert b.elements == max(plan.edges[x].elements for x in b.edges)
        assert b.bytes == 4 * b.elements
    if app.placement == "shared-objects":
        assert plan.buffer_bytes == sum(b.bytes for b in plan.buffers)
        at = [sum(b.bytes for b in plan.buffers[:i]) for i in range(len(plan.buffers))]
    else:                            # offsets: the arena's extent
        assert plan.buffer_bytes == max(b.offset + b.bytes for b in plan.buffers)
        at = [b.offset for b in plan.buffers]
    assert plan.memory_bytes == plan.param_bytes + plan.buffer_bytes
    # no two edges alive together share a buffer or overlap in the arena (pairwise,
    # independently of check_plan)
    group = group_index(app.pipelines)
    uses = {x: u for u in d.uses for x in u.stored}      # edge -> the use storing it
    for b in plan.buffers:
        inside = [uses[str(x)] for x in b.edges]
        # only the edges of one tensor (one use: written once, read by each) live together
        assert not any(conflict(a, c, group) for i, a in enumerate(inside) for c in inside[i + 1:]
                       if a is not c)
    one = plan.edges[EdgeId("CNN1", "l2", "l3")], plan.edges[EdgeId("CNN1", "l2", "l4")]
    if app.placement == "shared-objects":      # the paper's model: a buffer per edge
        assert one[0].buffer != one[1].buffer
    else:                                      # one tensor read twice: one buffer, one ring
        assert one[0].buffer == one[1].buffer and one[0].rows == one[1].rows
    region = {str(x): (at[e.buffer], at[e.buffer] + e.elements * 4, e.buffer)
              for x, e in plan.edges.items()}
    for x, (a0, a1, ka) in region.items():
        for y, (b0, b1, kb) in region.items():
            if x < y and ka != kb and a0 < b1 and b0 < a1:
                assert not conflict(uses[x], uses[y], group), (x, y)
    # firings agree with the phases; plan.json round trip
    for part in plan.partitions:
        counts = {x: plan.firings[part.name].count(x) for x in part.layers}
        assert counts == {x: plan.phases[part.cnn][x] for x in part.layers}
    to_json(plan, tmp_path / "plan.json")
    assert from_json(tmp_path / "plan.json") == plan


def test_plan_refuses_invalid_buffers(app):
    d = derive(app, uniform_phases(app, False))
    # put e23 and e24 of CNN1 (alive together) into one buffer
    a, b = edge_name("CNN1", "l2", "l3"), edge_name("CNN1", "l2", "l4")
    rest = [Buffer([x], 10 ** 6) for buf in d.buffers for x in buf.edges if x not in (a, b)]
    d.buffers = rest + [Buffer([a, b], 10 ** 6)]
    with pytest.raises(RuntimeError, match="alive together"):
        plan_for(app, d, {}, False)


def test_analysis_errors_become_input_errors(app, monkeypatch):
    import explorer.plan.derive as derive_mod
    from sdf3.analysis import Deadlock

    def stuck(*_a, **_k):
        raise Deadlock("actor l3 waits forever on l2->l3", "l3", "l2->l3")

    monkeypatch.setattr(derive_mod, "analyse_partition", stuck)
    with pytest.raises(InputError, match="partition CNN1.P1: .*l3 waits forever"):
        derive(app, uniform_phases(app, True))

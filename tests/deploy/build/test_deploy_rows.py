"""Deployment of parts of k output rows: one part model per layer and part size, called
ceil(H / k) times (the last part may be shorter); outputs equal the unmodified model's and
the arena is the plan's buffer bytes."""
from __future__ import annotations

import pytest

from csdf.parts import can_split, phases_for_rows
from deploy.build.derive import derive
from deploy.run.measure import measure
from deploy_fixtures import make_plan, tiny_cnn

TOL = 1e-4


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return tiny_cnn(tmp_path_factory.mktemp("tiny"))


def rows_everywhere(cnn, k):
    return phases_for_rows(cnn, {n: k for n in cnn.order()})


def mixed(cnn):
    """Different k per layer (1, 2, 3, 5, whole, ...): uneven last parts and every pair of
    neighbours with different part sizes."""
    ks = [2, 3, 1, 5, 16, 4]
    split = [n for n in cnn.order() if can_split(cnn.layer(n))]
    return phases_for_rows(cnn, {n: ks[i % len(ks)] for i, n in enumerate(split)})


@pytest.mark.parametrize("mode", ["k2", "k3", "k5", "mixed"])
def test_k_row_parts_equal_reference(cnn, tmp_path, mode):
    phases = mixed(cnn) if mode == "mixed" else rows_everywhere(cnn, int(mode[1:]))
    plan = make_plan([cnn], {cnn.name: phases})
    manifest = derive(plan, {cnn.name: cnn}, tmp_path)
    result = measure(tmp_path, frames=2, threads=1)
    for name, diff in result["max_abs_diff"].items():
        assert diff is not None and diff < TOL, (name, diff)
    assert result["arena_bytes"] == plan["buffer_bytes"]
    # one call per phase: ceil(H / k) for every layer by parts, counted from the shapes
    expected = sum(phases[n] for n in cnn.order())
    assert result["calls_per_frame"][cnn.name] == expected
    # one model per layer and part size: k rows, and the last part's rows when k divides
    # no H evenly
    for name in cnn.order():
        h, n = cnn.layer(name).output_shape[2], phases[name]
        models = {s.model for p in manifest.partitions for s in p.steps
                  if s.layer == name and s.model}
        if n > 1 and cnn.layer(name).op != "Input":
            k = -(-h // n)
            assert len(models) == (1 if h % k == 0 else 2), (name, models)


@pytest.mark.parametrize("key", sorted(__import__("test_deploy_parts_ops").CASES))
def test_every_op_in_parts_of_k_rows(key, tmp_path):
    """Every op the parts rules allow, in parts of 2 and of 3 rows (H = 7: uneven last
    parts, Pad parts meeting its padding), its neighbours in parts of other sizes."""
    from csdf.onnx_import import load_onnx
    from test_deploy_parts_ops import CASES, save_model

    nodes, inits, shape = CASES[key]
    cnn = load_onnx(save_model(nodes, inits, shape, str(tmp_path / "m.onnx")), "m")
    op = next(n for n in cnn.order() if cnn.layer(n).op == key.split()[0])
    for i, (k_op, k_rest) in enumerate([(2, 3), (3, None)]):
        rows = {n: (k_op if n == op else k_rest) for n in cnn.order()
                if n == op or k_rest is not None}
        phases = phases_for_rows(cnn, rows)
        plan = make_plan([cnn], {"m": phases})
        out = tmp_path / f"dep{i}"
        derive(plan, {"m": cnn}, out)
        result = measure(out, frames=2, threads=1)
        assert result["max_abs_diff"]["m"] < TOL, (key, k_op, result["max_abs_diff"])
        assert result["arena_bytes"] == plan["buffer_bytes"]
        assert result["calls_per_frame"]["m"] == len(plan["firings"]["m.all"])


def test_one_by_one_conv_parts_need_no_transpose(tmp_path):
    """A 1x1 conv's part model gathers its k rows and computes them as a batch of one-row
    images: no Transpose in the graph (its outputs are checked against ONNX Runtime on the
    unmodified model by test_every_op_in_parts_of_k_rows' "Conv 1x1")."""
    import onnx
    from csdf.onnx_import import load_onnx
    from test_deploy_parts_ops import CASES, save_model

    nodes, inits, shape = CASES["Conv 1x1"]
    cnn = load_onnx(save_model(nodes, inits, shape, str(tmp_path / "m.onnx")), "m")
    op = next(n for n in cnn.order() if cnn.layer(n).op == "Conv")
    plan = make_plan([cnn], {"m": phases_for_rows(cnn, {n: 3 for n in cnn.order()})})
    manifest = derive(plan, {"m": cnn}, tmp_path / "dep")
    models = {s.model for p in manifest.partitions for s in p.steps if s.layer == op}
    assert len(models) == 2          # parts of 3 rows and the last part's 1 (H = 7)
    for rel in models:
        ops = [n.op_type for n in onnx.load(str(tmp_path / "dep" / rel)).graph.node]
        assert "Conv" in ops and "Transpose" not in ops, (rel, ops)
    # the layers around it (Relu parts) still transpose: the rule is the 1x1 conv's only
    pre = next(n for n in cnn.order() if cnn.layer(n).op == "Relu")
    rel = next(s.model for p in manifest.partitions for s in p.steps if s.layer == pre)
    assert "Transpose" in [n.op_type for n in onnx.load(str(tmp_path / "dep" / rel)).graph.node]

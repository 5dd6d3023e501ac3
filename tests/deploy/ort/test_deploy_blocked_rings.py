"""Rows rings stored row-blocked (deploy/ort/blocked_rings.py): the rings chosen are exactly
those of whole blocks of channels between NCHWc kernels, their reorders are gone (and no
Reshape copies the arena), and every run still matches the unmodified model with the plan's
arena and calls."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from csdf.onnx_import import load_onnx
from csdf.parts import phases_for_rows
from deploy.runtime import manifest as mf
from deploy.ort import blocked as ob
from deploy.ort.backend import OrtBackend
from deploy.build.derive import derive
from deploy.runtime.executor import Executor
from deploy.run.measure import measure
from test_deploy_blocked import C, blocky_onnx
from deploy_fixtures import make_plan
from test_deploy_ort import check_equal

KERNELS = {"Conv", "MaxPool", "AveragePool"}   # ORT runs them as NCHWc kernels in a step
# (a global pool alone in a step stays plain: ORT blocks it only after another NCHWc node)


def _deploy(cnn, rows: int, folder):
    phases = phases_for_rows(cnn, {name: rows for name in cnn.order()})
    plan = make_plan([cnn], {cnn.name: phases})
    manifest = derive(plan, {cnn.name: cnn}, folder)
    be = OrtBackend("float32", threads=1, layout="blocked")
    Executor(mf.load(folder), folder, be)
    return plan, manifest, be


def _expected_rings(cnn, manifest, block: int) -> set[str]:
    """Rings between NCHWc kernels whose channels fill whole blocks: the rule, from the
    layers' ops and the edges' shapes (not from the chooser). One stored tensor has one
    layout, so a ring is blocked only when every reader of the same bytes is a kernel."""
    want = set()
    readers: dict[tuple, set[str]] = {}
    for eid, e in manifest.edges.items():
        src, dst = eid.split(".", 1)[1].split("->")
        readers.setdefault((src, e.buffer), set()).add(dst)
    for eid, e in manifest.edges.items():
        src, dst = eid.split(".", 1)[1].split("->")
        if e.layout != "hncw" or e.shape[1] % block:
            continue
        if src not in cnn.graph.nodes or dst not in cnn.graph.nodes:
            continue
        producer = cnn.layer(src)
        if producer.op == "AveragePool" and not int(producer.hyper.get("count_include_pad", 0)):
            continue     # its part rescales its rows by the real ones after the pool (plain)
        if producer.op in KERNELS and all(cnn.layer(d).op in KERNELS
                                          for d in readers[(src, e.buffer)]):
            want.add(eid)
    return want


def pools_onnx(path) -> str:
    """conv 3->C 3x3, max pool 3x3 stride 2 pad 1, depthwise 3x3, average pool 3x3 pad 1
    (padding not counted), conv 1x1: every window op's border phases read padding rows."""
    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
             for n, s in (("w0", [C, 3, 3, 3]), ("w1", [C, 1, 3, 3]), ("w2", [C, C, 1, 1]))]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w0"], ["c0"], name="stem", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("MaxPool", ["c0"], ["p1"], name="maxp", kernel_shape=[3, 3], strides=[2, 2],
               pads=[1, 1, 1, 1]),
             n("Conv", ["p1", "w1"], ["c2"], name="dw", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
               group=C),
             n("AveragePool", ["c2"], ["p3"], name="avgp", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Conv", ["p3", "w2"], ["y"], name="mix", kernel_shape=[1, 1])]
    graph = helper.make_graph(nodes, "pools", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 13, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, 7, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def test_rings_chosen_by_the_rule_and_outputs_equal(tmp_path):
    """Every layer in parts of 3 rows (10 rows: the last part is 1 row, a second model per
    layer): widen->dw (a one-row conv into a window conv) is row-blocked; dw's one ring,
    read by pw and by the Add (not an NCHWc kernel), the 12-channel ring, the frame and the
    rings of the Add and Concat stay plain; outputs equal, arena = plan."""
    cnn = load_onnx(blocky_onnx(tmp_path / "blocky.onnx"), "blocky")
    block = ob.block_size(ort.SessionOptions())
    plan, manifest, be = _deploy(cnn, 3, tmp_path / "dep")
    rings = {e for e in be.blocked_edges if manifest.edges[e].layout == "hncw"}
    want = _expected_rings(cnn, manifest, block)
    assert "blocky.widen->dw" in want and "blocky.dw->pw" not in want
    assert rings == want, sorted(rings ^ want)
    check_equal(measure(tmp_path / "dep", frames=3, layout="blocked", threads=1), plan)


def test_window_ops_with_padding_rows(tmp_path):
    """Max pool (masked rows never win), depthwise conv, average pool not counting padding:
    in parts of 2 rows and row by row, the rings between them row-blocked and the outputs
    equal the unmodified model's."""
    cnn = load_onnx(pools_onnx(tmp_path / "pools.onnx"), "pools")
    block = ob.block_size(ort.SessionOptions())
    for rows in (2, 1):
        plan, manifest, be = _deploy(cnn, rows, tmp_path / f"dep{rows}")
        rings = {e for e in be.blocked_edges if manifest.edges[e].layout == "hncw"}
        assert rings == _expected_rings(cnn, manifest, block)
        assert {"pools.stem->maxp", "pools.maxp->dw", "pools.dw->avgp"} <= rings
        check_equal(measure(tmp_path / f"dep{rows}", frames=3, layout="blocked", threads=1), plan)


def test_rewritten_step_has_no_reorders_and_no_arena_copies(tmp_path):
    """The depthwise part's optimised graph (a masked window) loses both reorders, its ring
    ports are declared row-blocked [S, N, C/b, W, b], and no Reshape reads a graph input or
    writes a graph output (that would copy the arena)."""
    cnn = load_onnx(pools_onnx(tmp_path / "pools.onnx"), "pools")
    block = ob.block_size(ort.SessionOptions())
    _, manifest, _ = _deploy(cnn, 2, tmp_path / "dep")
    step = next(s for p in manifest.partitions for s in p.steps if s.layer == "dw")
    opt = ob.optimized(tmp_path / "dep" / step.model, tmp_path, ort.SessionOptions())
    assert [nd.op_type for nd in opt.graph.node].count("ReorderInput") == 1
    out = ob.strip(opt, frozenset({"in0", "out0"}), block)
    g = out.graph
    assert not {"ReorderInput", "ReorderOutput"} & {nd.op_type for nd in g.node}
    ports = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in list(g.input) + list(g.output)}
    slots = next(b for b in step.bind if b.name == "in0").shape[0]
    w = cnn.layer("dw").output_shape[3]
    assert ports["in0"] == [slots, 1, C // block, w, block]
    assert ports["out0"] == [2, 1, C // block, w, block]
    io = set(ports)
    assert not [nd for nd in g.node if nd.op_type == "Reshape" and (nd.input[0] in io or nd.output[0] in io)]


def fork_onnx(path) -> str:
    """conv 3->C, then a 1x1 conv read by two NCHWc kernels (depthwise 3x3, 1x1) whose results
    are added: by parts, one NCHWc result written to two rings."""
    rng = np.random.default_rng(11)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
             for n, s in (("w0", [C, 3, 3, 3]), ("w1", [C, C, 1, 1]), ("w2", [C, 1, 3, 3]),
                          ("w3", [C, C, 1, 1]))]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w0"], ["c0"], name="stem", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Conv", ["c0", "w1"], ["c1"], name="fork", kernel_shape=[1, 1]),
             n("Conv", ["c1", "w2"], ["a"], name="left", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=C),
             n("Conv", ["c1", "w3"], ["b"], name="right", kernel_shape=[1, 1]),
             n("Add", ["a", "b"], ["y"], name="join")]
    graph = helper.make_graph(nodes, "fork", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, 6, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def test_one_result_into_two_rings(tmp_path):
    """fork's result goes to two rings, both row-blocked (one 5-D view of it, read by both
    rings' Transposes); whole and in parts of 2 rows the outputs equal the model's."""
    cnn = load_onnx(fork_onnx(tmp_path / "fork.onnx"), "fork")
    block = ob.block_size(ort.SessionOptions())
    for rows, where in ((2, "parts"), (6, "whole")):
        phases = phases_for_rows(cnn, {name: rows for name in cnn.order() if name != "fork"})
        plan = make_plan([cnn], {cnn.name: {**phases, "fork": 1}})
        manifest = derive(plan, {cnn.name: cnn}, tmp_path / where)
        be = OrtBackend("float32", threads=1, layout="blocked")
        Executor(mf.load(tmp_path / where), tmp_path / where, be)
        rings = {e for e in be.blocked_edges if manifest.edges[e].layout == "hncw"}
        assert rings == _expected_rings(cnn, manifest, block)
        if rows == 2:
            assert {"fork.fork->left", "fork.fork->right"} <= rings
        check_equal(measure(tmp_path / where, frames=2, layout="blocked", threads=1), plan)

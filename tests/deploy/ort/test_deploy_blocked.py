"""Whole-layer tensors stored in ONNX Runtime's blocked NCHWc layout (deploy/ort/blocked.py):
the edges chosen are exactly those whose both ends are NCHWc kernels or layout-neutral steps
and whose channels fill whole blocks, and the run still matches the unmodified model with the
plan's arena and calls."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from csdf.onnx_import import load_onnx
from deploy.runtime import manifest as mf
from deploy.ort import blocked as ob
from deploy.ort.backend import OrtBackend
from deploy.build.derive import derive
from deploy.runtime.executor import Executor
from deploy.run.measure import measure
from deploy_fixtures import make_plan
from test_deploy_ort import check_equal, alternate

C = 32   # a multiple of every NCHWc block size ONNX Runtime uses (4, 8, 16)


def blocky_onnx(path) -> str:
    """conv 3->12 (12 channels: never a whole number of 8- or 16-blocks), conv 12->C, depthwise,
    pointwise, residual add, max pool, channel concat, 1x1 conv, global pool, flatten, gemm."""
    rng = np.random.default_rng(3)
    inits = []

    def w(name, shape):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name))
        return name

    n = helper.make_node
    nodes = [
        n("Conv", ["x", w("w0", [12, 3, 3, 3]), w("b0", [12])], ["c0"], name="stem", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        n("Conv", ["c0", w("w1", [C, 12, 1, 1]), w("b1", [C])], ["c1"], name="widen", kernel_shape=[1, 1]),
        n("Relu", ["c1"], ["r1"], name="widen_relu"),
        n("Conv", ["r1", w("w2", [C, 1, 3, 3]), w("b2", [C])], ["c2"], name="dw", kernel_shape=[3, 3],
          pads=[1, 1, 1, 1], group=C),
        n("Conv", ["c2", w("w3", [C, C, 1, 1]), w("b3", [C])], ["c3"], name="pw", kernel_shape=[1, 1]),
        n("Add", ["c3", "c2"], ["a4"], name="add"),
        n("MaxPool", ["a4"], ["p5"], name="pool", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        n("Concat", ["p5", "a4"], ["k6"], name="cat", axis=1),
        n("Conv", ["k6", w("w7", [C, 2 * C, 1, 1]), w("b7", [C])], ["c7"], name="mix", kernel_shape=[1, 1]),
        n("GlobalAveragePool", ["c7"], ["g8"], name="gap"),
        n("Flatten", ["g8"], ["f9"], name="flat"),
        n("Gemm", ["f9", w("w10", [5, C]), w("b10", [5])], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(nodes, "blocky", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def test_block_size_is_the_layout_reorder_writes():
    """The probed block size b describes ORT's NCHWc memory: ReorderInput of x [1, C, H, W]
    holds x.reshape(1, C/b, b, H, W) with the b channels innermost."""
    block = ob.block_size(ort.SessionOptions())
    assert block in (4, 8, 16) and C % block == 0
    x = np.arange(C * 2 * 3, dtype=np.float32).reshape(1, C, 2, 3)
    node = helper.make_node("ReorderInput", ["x"], ["y"], domain=ob.NCHWC)
    model = helper.make_model(
        helper.make_graph([node], "r", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(ob.NCHWC, 1)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"x": x})[0]
    assert got.shape == x.shape     # a whole number of blocks: no padding, same bytes
    want = x.reshape(1, C // block, block, 2, 3).transpose(0, 1, 3, 4, 2)
    assert np.array_equal(got.ravel(), want.ravel())


def test_blocked_edges_and_outputs(tmp_path):
    cnn = load_onnx(blocky_onnx(tmp_path / "blocky.onnx"), "blocky")
    plan = make_plan([cnn], {cnn.name: {name: 1 for name in cnn.order()}})
    manifest = derive(plan, {cnn.name: cnn}, tmp_path / "dep")
    be = OrtBackend("float32", threads=1, layout="blocked")
    Executor(mf.load(tmp_path / "dep"), tmp_path / "dep", be)
    blocked = {eid.split(".", 1)[1] for eid in be.blocked_edges}
    # both ends NCHWc kernels (conv, depthwise, pool, global pool) or neutral (add, concat),
    # channels C; not: the frame, the 12-channel edge, anything touching flatten or gemm
    want = {"widen->dw", "dw->pw", "dw->add", "pw->add", "add->pool", "add->cat", "pool->cat",
            "cat->mix", "mix->gap"}
    assert blocked == want, sorted(blocked)
    assert all(manifest.edges[e].shape[1] % ob.block_size(ort.SessionOptions()) == 0
               for e in be.blocked_edges)
    check_equal(measure(tmp_path / "dep", frames=3, layout="blocked", threads=1), plan)


def test_blocked_mixed_with_parts(tmp_path):
    """Layers by parts beside whole ones (rows rings row-blocked where both ends allow,
    tests/deploy/ort/test_deploy_blocked_rings.py): outputs equal, arena = plan."""
    cnn = load_onnx(blocky_onnx(tmp_path / "blocky.onnx"), "blocky")
    plan = make_plan([cnn], {cnn.name: alternate(cnn)})
    derive(plan, {cnn.name: cnn}, tmp_path / "dep")
    check_equal(measure(tmp_path / "dep", frames=3, layout="blocked", threads=1), plan)


def test_strip_removes_only_the_chosen_reorders(tmp_path):
    path = blocky_onnx(tmp_path / "m.onnx")
    cnn = load_onnx(path, "m")
    plan = make_plan([cnn], {cnn.name: {name: 1 for name in cnn.order()}})
    derive(plan, {cnn.name: cnn}, tmp_path / "dep")
    step = next(s for p in mf.load(tmp_path / "dep").partitions for s in p.steps
                if s.layer == "dw")
    opt = ob.optimized(tmp_path / "dep" / step.model, tmp_path, ort.SessionOptions())
    ops = [nd.op_type for nd in opt.graph.node]
    assert ops.count("ReorderInput") == 1 and "ReorderOutput" in ops
    only_in = ob.strip(opt, frozenset({"in0"}))
    ops_in = [nd.op_type for nd in only_in.graph.node]
    assert "ReorderInput" not in ops_in and "ReorderOutput" in ops_in
    both = ob.strip(opt, frozenset({"in0", "out0", "out1"}))
    assert not {"ReorderInput", "ReorderOutput"} & {nd.op_type for nd in both.graph.node}


def test_add_of_a_constant_is_not_passed_through_blocked(tmp_path):
    """An Add of a per-channel constant between two convs: the constant is plain [1, C, 1, 1],
    so the step must not take the blocked layout on (it did: max |diff| of several units)."""
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
             for n, s in (("w1", [C, 3, 3, 3]), ("k", [1, C, 1, 1]), ("w2", [C, C, 3, 3]),
                                                         ("w3", [C, C, 1, 1]))]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1"], ["c1"], name="c1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Add", ["c1", "k"], ["a"], name="shift"),
             n("Conv", ["a", "w2"], ["c2"], name="c2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             n("Add", ["c2", "a"], ["r"], name="res"),
             n("Conv", ["r", "w3"], ["y"], name="c3", kernel_shape=[1, 1])]
    graph = helper.make_graph(nodes, "shift", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, C, 8, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "shift.onnx"))
    cnn = load_onnx(str(tmp_path / "shift.onnx"), "shift")
    plan = make_plan([cnn], {"shift": {name: 1 for name in cnn.order()}})
    derive(plan, {"shift": cnn}, tmp_path / "dep")
    be = OrtBackend(threads=1, layout="blocked")
    Executor(mf.load(tmp_path / "dep"), tmp_path / "dep", be)
    # the constant Add keeps its edges plain (before the fix all five edges went blocked)
    assert not be.blocked_edges & {"shift.c1->shift", "shift.shift->c2", "shift.shift->res"}
    result = measure(tmp_path / "dep", frames=2, layout="blocked", threads=1)
    check_equal(result, plan)

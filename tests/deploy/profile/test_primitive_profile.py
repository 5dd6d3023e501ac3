"""`explore profile --primitives` measurements (deploy/profile/primitives.py) on one 3x3 conv
layer large enough for page-granular workspace figures, the profile file round trip, and
deployments built with every primitive matching the unmodified model."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from csdf.model import CNN, Layer
from csdf.onnx_import import load_onnx
from deploy.build.derive import derive
from deploy.run.measure import measure
from deploy.profile.primitives import profile_primitives
from explorer.throughput.device_profile import DeviceProfile, load_profile, save_profile
from test_deploy_blocked import blocky_onnx
from deploy_fixtures import make_plan
from test_deploy_ort import check_equal
from test_primitives import conv_layer

CASE = (1, 64, 28, 28, 64, 3, 1, [1, 1, 1, 1], 1, 1, True)


def conv_relu():
    """Input -> the CASE conv -> Relu, the network both tests time."""
    layer, shape, _ = conv_layer(CASE, 0)
    g = nx.DiGraph()
    g.add_node("x", layer=Layer("x", "Input", output_shape=shape))
    g.add_node("conv", layer=layer)
    g.add_node("relu", layer=Layer("relu", "Relu", inputs=["conv"], output_shape=layer.output_shape))
    g.add_edge("x", "conv", shape=shape)
    g.add_edge("conv", "relu", shape=layer.output_shape)
    return CNN("c", g), layer, shape


@pytest.fixture(scope="module")
def table():
    return profile_primitives(conv_relu()[0], repeats=3, threads=1)


def test_every_primitive_is_measured(table):
    conv = table["layers"]["conv"]
    assert set(conv) == {"ort_nchw", "ort_nchwc", "im2col", "kn2row", "winograd"}
    assert all(v["ms"] > 0 for v in conv.values())
    assert conv["ort_nchwc"]["layout"] == "nchwc" and conv["im2col"]["layout"] == "nchw"
    # Relu has no NCHWc kernel of its own but is layout-neutral; it is the sink: NCHW only
    assert set(table["layers"]["relu"]) == {"ort_nchw"}


def test_workspace_is_measured_not_assumed(table):
    """im2col's patch matrix alone is C*k*k*Ho*Wo floats (1.8 MB); the measured peak must
    hold it. Winograd's is the transformed tiles, 16 * C * 14 * 14 floats (0.8 MB) twice
    (V before and after the transform), far below im2col's; ORT's NCHWc kernel needs none
    of that size. Resolution of the measurement: ~128 KiB (docs/primitives.md)."""
    conv = table["layers"]["conv"]
    patch = 64 * 9 * 28 * 28 * 4
    assert patch <= conv["im2col"]["workspace_bytes"] <= 3 * patch
    assert conv["winograd"]["workspace_bytes"] >= 16 * 64 * 14 * 14 * 4
    assert conv["winograd"]["workspace_bytes"] < conv["im2col"]["workspace_bytes"]
    assert conv["ort_nchwc"]["workspace_bytes"] < patch // 8


def test_weights_and_transitions(table):
    conv = table["layers"]["conv"]
    plain = (64 * 64 * 9 + 64) * 4
    assert conv["ort_nchw"]["weight_bytes"] == plain
    assert conv["winograd"]["weight_bytes"] >= (64 * 64 * 16 + 64) * 4     # U = G g G^T: 16/9
    t = table["transitions"]
    assert set(t) == {"c.x->conv", "c.conv->relu"}
    # priced in the NCHWc end's step (port plain - every port blocked): never negative, and
    # only the direction a plan can take: x and relu have no NCHWc form
    assert all(v[k] >= 0 for v in t.values() for k in ("to_nchwc_ms", "to_nchw_ms"))
    assert t["c.x->conv"]["to_nchw_ms"] == 0 and t["c.conv->relu"]["to_nchwc_ms"] == 0


def test_candidates_are_timed_computing_the_step(tmp_path):
    """Every primitive of the conv, bound to the views of the conv's step in the context
    deployment the profile times it in (deploy/profile/primitive_timing.py, a child process as in
    `explore profile`), writes what the deployment's own step writes there."""
    import onnx
    from deploy.profile import primitive_timing
    from deploy.steps import primitives
    from deploy.steps.parts import step_model
    from deploy.profile.primitives import context as timing_context, layer_ports
    cnn, layer, shape = conv_relu()
    context = timing_context(cnn, {"x": {}, "conv": {"ort_nchwc": {}}, "relu": {}}, "float32", tmp_path / "ctx")
    ins, outs, _, _ = layer_ports(cnn, "conv")
    jobs = []
    for prim in primitives.applicable(layer, shape):
        path = tmp_path / f"{prim}.onnx"
        onnx.save(step_model(layer, ins, outs, "float32", primitive=prim), str(path))
        plain = primitive_timing.Variant((), ("in0", "out0"))    # the context's edges are plain
        jobs.append(primitive_timing.TimingJob("conv", str(path), primitives.get(prim).layout,
                                               (plain,), check=True))
    results = primitive_timing.measure(context, jobs, threads=1, repeats=2)
    assert len(results) == 5
    for job, r in zip(jobs, results):
        assert r.ms[0] > 0 and r.diff == (0.0,)
        assert r.max_abs_diff[0] < 1e-4, job.model


def test_profile_file_keeps_the_table(table, tmp_path):
    from explorer.throughput.device_profile import LayerTimes
    for name in ("p.json", "p.yaml"):
        path = save_profile(DeviceProfile("p", models={"c": {"conv": LayerTimes(1.0)}},
                                          primitives={"c": table}), tmp_path / name)
        assert load_profile(path).primitives == {"c": table}


@pytest.mark.parametrize("assign", [
    {"stem": "winograd", "widen": "kn2row", "dw": "im2col", "pw": "ort_nchwc", "mix": "ort_nchwc",
     "add": "ort_nchwc", "pool": "ort_nchw", "cat": "ort_nchwc", "gap": "ort_nchwc"},
    {"stem": "im2col", "widen": "ort_nchwc", "dw": "winograd", "pw": "kn2row", "mix": "im2col",
     "add": "ort_nchwc", "pool": "ort_nchwc", "cat": "ort_nchw", "gap": "ort_nchw"},
    # dw's one tensor, read by pw (blocked) and add (plain): stored plain for both
    {"dw": "ort_nchwc", "pw": "ort_nchwc", "add": "ort_nchw", "pool": "ort_nchwc", "cat": "ort_nchwc"},
])
def test_deployed_primitives_match_the_model(tmp_path, assign):
    cnn = load_onnx(blocky_onnx(tmp_path / "blocky.onnx"), "blocky")
    plan = make_plan([cnn], {cnn.name: {name: 1 for name in cnn.order()}})
    plan["primitives"] = {cnn.name: assign}
    manifest = derive(plan, {cnn.name: cnn}, tmp_path / "dep")
    steps = {s.layer: s.primitive for _, _, s in manifest.steps()}
    assert all(steps[k] == v for k, v in assign.items())
    from deploy.runtime import manifest as mf
    from deploy.ort import blocked as ob
    from deploy.ort.backend import OrtBackend
    from deploy.runtime.executor import Executor
    import onnxruntime as ort
    be = OrtBackend("float32", threads=1)
    Executor(mf.load(tmp_path / "dep"), tmp_path / "dep", be)
    block = ob.block_size(ort.SessionOptions())
    # one stored tensor per producer, one layout: blocked when every reader is
    want = {f"blocky.{s}->{d}" for s, d in cnn.graph.edges
            if assign.get(s) == "ort_nchwc" and cnn.edge_shape(s, d)[1] % block == 0
            and all(assign.get(r) == "ort_nchwc" for r in cnn.graph.successors(s))}
    assert be.blocked_edges == want
    result = measure(tmp_path / "dep", frames=3, threads=1)
    check_equal(result, plan)
    assert np.isfinite(list(result["max_abs_diff"].values())).all()

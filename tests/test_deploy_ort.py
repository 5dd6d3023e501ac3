"""Deployment on ONNX Runtime: outputs equal the unmodified model's, the arena is the plan's
buffer bytes, and every firing of the plan is one compiled call."""
from __future__ import annotations

import json

import numpy as np
import pytest

from csdf.parts import all_parts, can_split
from deploy import arena
from deploy.derive import derive
from deploy.measure import measure
from deploy.parts_onnx import InPort, OutPort, Variant, step_model
from sdf3.errors import InputError
from test_deploy_fixtures import make_plan, tiny_cnn

TOL = 1e-4


def whole(cnn):
    return {name: 1 for name in cnn.order()}


def alternate(cnn):
    """Every other splittable layer by parts: whole producers feeding parts and back."""
    ph, flip = whole(cnn), True
    for name in cnn.order():
        layer = cnn.layer(name)
        if can_split(layer) and layer.output_shape[2] > 1:
            ph[name] = layer.output_shape[2] if flip else 1
            flip = not flip
    return ph


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return tiny_cnn(tmp_path_factory.mktemp("tiny"))


def _check(result, plan):
    for name, diff in result["max_abs_diff"].items():
        assert diff is not None and diff < TOL, (name, diff)
    assert result["arena_bytes"] == plan["buffer_bytes"]
    for cnn_name, calls in result["calls_per_frame"].items():
        fired = sum(len(f) for p, f in plan["firings"].items() if p.split(".")[0] == cnn_name)
        assert calls == fired


@pytest.mark.parametrize("mode", ["whole", "all_parts", "alternate"])
def test_outputs_equal_reference(cnn, tmp_path, mode):
    phases = {"whole": whole, "all_parts": all_parts, "alternate": alternate}[mode](cnn)
    plan = make_plan([cnn], {cnn.name: phases})
    derive(plan, {cnn.name: cnn}, tmp_path)
    result = measure(tmp_path, frames=3)
    _check(result, plan)
    assert result["param_bytes"] == 4 * cnn.param_count


def test_by_parts_needs_less_arena_and_more_calls(cnn, tmp_path):
    plans = {m: make_plan([cnn], {cnn.name: f(cnn)}) for m, f in (("w", whole), ("p", all_parts))}
    assert plans["p"]["buffer_bytes"] < plans["w"]["buffer_bytes"]
    # one call per output row of every split layer: count them from the shapes
    expected = sum(cnn.layer(n).output_shape[2] if can_split(cnn.layer(n)) else 1 for n in cnn.order())
    derive(plans["p"], {cnn.name: cnn}, tmp_path)
    assert measure(tmp_path, frames=2, check=False)["calls_per_frame"][cnn.name] == expected


def test_reuse_shares_regions(cnn, tmp_path):
    plan = make_plan([cnn], {cnn.name: whole(cnn)}, placement="shared-objects")
    naive = make_plan([cnn], {cnn.name: whole(cnn)}, reuse=False, placement="shared-objects")
    assert len(plan["buffers"]) < len(naive["buffers"])
    manifest = derive(plan, {cnn.name: cnn}, tmp_path)
    # edges of one buffer share its offset; buffers never overlap
    for e_name, e in manifest["edges"].items():
        assert e["offset"] == manifest["buffers"][e["buffer"]]["offset"]
    place = arena.place([b["bytes"] for b in plan["buffers"]])
    for a in range(len(plan["buffers"])):
        for b in range(a + 1, len(plan["buffers"])):
            assert arena.disjoint(place, a, b)
    _check(measure(tmp_path, frames=2), plan)


def test_device_offsets_aligned():
    place = arena.place([10, 300, 7, 256], arena.DEVICE_ALIGN)
    assert place.offsets == [0, 256, 768, 1024]
    assert place.total == 1280
    assert arena.place([10, 300, 7]).offsets == [0, 10, 310]


@pytest.mark.parametrize("parts", [False, True])
def test_pipelined_double_buffers(tmp_path, parts):
    cnn = tiny_cnn(tmp_path)
    phases = all_parts(cnn) if parts else whole(cnn)
    plan = make_plan([cnn], {cnn.name: phases}, split={cnn.name: 8}, pipelined=True)
    doubled = [e for e in plan["edges"] if e.endswith("(2)")]
    assert doubled, "the split must cross at least one edge"
    manifest = derive(plan, {cnn.name: cnn}, tmp_path / "dep")
    # the two copies of a crossing edge, and partitions of one set, never share a region
    for name in doubled:
        one = manifest["edges"][name[:-3] + "(1)"]["buffer"]
        assert one != manifest["edges"][name]["buffer"]
    result = measure(tmp_path / "dep", frames=5)   # odd count: both parities, uneven end
    _check(result, plan)


def test_sequential_partitions(tmp_path):
    cnn = tiny_cnn(tmp_path)
    plan = make_plan([cnn], {cnn.name: alternate(cnn)}, split={cnn.name: 5})
    derive(plan, {cnn.name: cnn}, tmp_path / "dep")
    _check(measure(tmp_path / "dep", frames=2), plan)


def test_multi_cnn_round_robin(tmp_path):
    a = tiny_cnn(tmp_path, "a", seed=1)
    b = tiny_cnn(tmp_path, "b", seed=2, shape=(1, 3, 12, 20), classes=5)
    plan = make_plan([a, b], {"a": all_parts(a), "b": whole(b)})
    derive(plan, {"a": a, "b": b}, tmp_path / "dep")
    result = measure(tmp_path / "dep", frames=5)
    _check(result, plan)
    assert set(result["fps"]) == {"a", "b"}
    # the two CNNs never run at the same time: their edges share arena bytes
    regions = {e: (buf["offset"], buf["offset"] + buf["bytes"]) for buf in plan["buffers"]
               for e in buf["edges"]}
    assert any(x.startswith("a.") and y.startswith("b.") and rx[0] < ry[1] and ry[0] < rx[1]
               for x, rx in regions.items() for y, ry in regions.items())


def test_fp16_arena(cnn, tmp_path):
    plan = make_plan([cnn], {cnn.name: all_parts(cnn)}, data_bytes=2)
    fp32 = make_plan([cnn], {cnn.name: all_parts(cnn)})
    assert plan["buffer_bytes"] * 2 == fp32["buffer_bytes"]
    manifest = derive(plan, {cnn.name: cnn}, tmp_path)
    assert manifest["dtype"] == "float16"
    result = measure(tmp_path, frames=2)
    assert result["arena_bytes"] == plan["buffer_bytes"]
    # fp16 storage: relative error about 2^-11 per rounding; softmax outputs are <= 1
    assert result["max_abs_diff"][cnn.name] < 5e-3


def test_border_variants_match_numpy():
    """A 3-row conv part at the top border equals the full conv's first output row."""
    from csdf.model import Layer
    rng = np.random.default_rng(3)
    w = rng.standard_normal((2, 1, 3, 3)).astype(np.float32)
    layer = Layer("c", "Conv", {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1],
                                "dilations": [1, 1], "group": 1}, {"W": w}, ["x"], (1, 2, 5, 4))
    x = rng.standard_normal((1, 1, 5, 4)).astype(np.float32)
    ring = np.ascontiguousarray(x.transpose(2, 0, 1, 3))[:4]      # 4 slots, rows 0..3
    model = step_model(layer, [InPort("in0", (1, 1, 5, 4), "hncw", 4, 2)],
                       [OutPort("out0", (1, 2, 5, 4), "hncw", True)], "float32", Variant(1, 0))
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"in0": ring, "in0_idx": np.array([0, 1], np.int32)})[0]
    pad = np.pad(x[0, 0], 1)
    want = np.array([[np.sum(pad[0:3, j:j + 3] * w[o, 0]) for j in range(4)] for o in range(2)])
    np.testing.assert_allclose(got[0, 0], want, atol=1e-5)


def test_bad_plans(cnn, tmp_path):
    plan = make_plan([cnn], {cnn.name: whole(cnn)})
    broken = json.loads(json.dumps(plan))
    broken["edges"].pop(next(iter(broken["edges"])))
    with pytest.raises(InputError, match="no entry for edge"):
        derive(broken, {cnn.name: cnn}, tmp_path / "a")
    small = json.loads(json.dumps(plan))
    name = next(iter(small["edges"]))
    small["buffers"][small["edges"][name]["buffer"]]["bytes"] = 4
    with pytest.raises(InputError, match="needs"):
        derive(small, {cnn.name: cnn}, tmp_path / "b")
    half = json.loads(json.dumps(plan))
    half["data_bytes"] = 1
    with pytest.raises(InputError, match="data_bytes"):
        derive(half, {cnn.name: cnn}, tmp_path / "c")


def test_cli_run_json(cnn, tmp_path, capsys):
    from explorer.cli import main
    plan = make_plan([cnn], {cnn.name: alternate(cnn)})
    derive(plan, {cnn.name: cnn}, tmp_path)
    assert main(["run", str(tmp_path), "--frames", "2", "--json", "--in-process"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"fps", "arena_bytes", "param_bytes", "max_abs_diff", "calls_per_frame",
                        "peak_rss_bytes"}
    assert out["arena_bytes"] == plan["buffer_bytes"]
    assert main(["run", str(tmp_path / "missing")]) == 2


@pytest.mark.parametrize("layout", ["nchw", "auto"])
def test_layouts_give_equal_outputs(cnn, tmp_path, layout):
    """Plain NCHW kernels, or per step the faster of NCHWc and NCHW: same arena, same calls,
    outputs still equal the reference; "auto" records one choice per step model file."""
    from deploy import manifest as mf
    from deploy.backend_ort import OrtBackend
    from deploy.executor import Executor
    plan = make_plan([cnn], {cnn.name: alternate(cnn)})
    manifest = derive(plan, {cnn.name: cnn}, tmp_path)
    _check(measure(tmp_path, frames=2, layout=layout), plan)
    if layout == "auto":
        be = OrtBackend("float32", layout="auto")
        Executor(mf.load(tmp_path), tmp_path, be)
        used = {str(tmp_path / s["model"]) for p in manifest["partitions"] for s in p["steps"]
                if s["model"]}
        assert set(be.chosen) == used
        assert set(be.chosen.values()) <= {"nchwc", "nchw"}


@pytest.mark.parametrize("mode", ["whole", "all_parts"])
def test_offsets_arena_is_the_plan(cnn, tmp_path, mode):
    """Issue 14: the deployment's arena uses the plan's offsets: every edge at its buffer's
    offset, the arena exactly the plan's buffer bytes, smaller than shared objects', and
    edges that overlap in the arena never alive together (replayed from the firings)."""
    phases = {"whole": whole, "all_parts": all_parts}[mode](cnn)
    plan = make_plan([cnn], {cnn.name: phases})
    shared = make_plan([cnn], {cnn.name: phases}, placement="shared-objects")
    assert plan["placement"] == "offsets" and plan["buffer_bytes"] <= shared["buffer_bytes"]
    manifest = derive(plan, {cnn.name: cnn}, tmp_path)
    assert manifest["arena_bytes"] == plan["buffer_bytes"]
    firings = plan["firings"][f"{cnn.name}.all"]
    first = {x: firings.index(x) for x in set(firings)}
    last = {x: len(firings) - 1 - firings[::-1].index(x) for x in set(firings)}
    alive = {}
    for name, e in manifest["edges"].items():
        assert e["offset"] == plan["buffers"][e["buffer"]]["offset"]
        src, dst = name.split(".", 1)[1].split("->")
        alive[name] = (first[src], last[dst], e["offset"], e["offset"] + e["bytes"])
    for x, (a0, a1, o0, o1) in alive.items():
        for y, (b0, b1, p0, p1) in alive.items():
            if x < y and o0 < p1 and p0 < o1:
                assert a1 < b0 or b1 < a0, (x, y)
    _check(measure(tmp_path, frames=2), plan)

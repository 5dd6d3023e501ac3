"""Deployment on ONNX Runtime: outputs equal the unmodified model's, the arena is the plan's
buffer bytes, and every firing of the plan is one compiled call."""
from __future__ import annotations

import json

import numpy as np
import pytest

from csdf.parts import all_parts, can_split
from deploy.runtime import arena
from deploy.build.derive import derive
from deploy.run.measure import measure
from deploy.steps.parts import InPort, OutPort, step_model
from sdf3.errors import InputError
from deploy_fixtures import make_plan, tiny_cnn

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


@pytest.fixture(scope="module")
def deployed(cnn, tmp_path_factory):
    """`deployed(plan)`: (manifest, folder) of the module's CNN deployed under `plan`, made
    once per distinct plan and shared by the tests that deploy the same plan (the whole,
    every-layer-by-parts and alternate plans are each deployed by several); runs only read
    the folder (a test that writes into it works on a copy)."""
    made: dict[str, tuple] = {}

    def deploy(plan: dict):
        key = json.dumps(plan, sort_keys=True)
        if key not in made:
            out = tmp_path_factory.mktemp("dep")
            made[key] = (derive(plan, {cnn.name: cnn}, out), out)
        return made[key]
    return deploy


def check_equal(result, plan):
    for name, diff in result["max_abs_diff"].items():
        assert diff is not None and diff < TOL, (name, diff)
    assert result["arena_bytes"] == plan["buffer_bytes"]
    for cnn_name, calls in result["calls_per_frame"].items():
        fired = sum(len(f) for p, f in plan["firings"].items() if p.split(".")[0] == cnn_name)
        assert calls == fired


@pytest.mark.parametrize("mode", ["whole", "all_parts", "alternate"])
def test_outputs_equal_reference(cnn, deployed, mode):
    phases = {"whole": whole, "all_parts": all_parts, "alternate": alternate}[mode](cnn)
    plan = make_plan([cnn], {cnn.name: phases})
    _, dep = deployed(plan)
    # ONNX Runtime's default threads (a pool per step session, kernels splitting their rows
    # and channels over the cores) here and in the pipelined runs; elsewhere one thread
    result = measure(dep, frames=3)
    check_equal(result, plan)
    # what the sessions hold: NCHWc kernels keep conv weights reordered (channels padded
    # to whole blocks), so at least the plan's parameters; plan_param_bytes stands beside it
    assert result["param_bytes"] >= 4 * cnn.param_count
    assert result["footprint_bytes"] == result["peak_rss_bytes"] - result["baseline_rss_bytes"]


def test_by_parts_needs_less_arena_and_more_calls(cnn, deployed):
    plans = {m: make_plan([cnn], {cnn.name: f(cnn)}) for m, f in (("w", whole), ("p", all_parts))}
    assert plans["p"]["buffer_bytes"] < plans["w"]["buffer_bytes"]
    # one call per output row of every split layer: count them from the shapes
    expected = sum(cnn.layer(n).output_shape[2] if can_split(cnn.layer(n)) else 1 for n in cnn.order())
    _, dep = deployed(plans["p"])
    result = measure(dep, frames=3, check=False, threads=1)
    assert result["calls_per_frame"][cnn.name] == expected
    # the per-frame medians: a thread's CPU time does not exceed the wall time it spans
    # (up to the kernel's accounting, some microseconds), one frame's wall time never
    # exceeds the whole run's
    wall, cpu = result["frame_ms_median"][cnn.name], result["frame_cpu_ms_median"][cnn.name]
    assert 0 < cpu <= wall + 0.05 and wall <= 3 / result["fps"][cnn.name] * 1e3


def test_reuse_shares_regions(cnn, tmp_path):
    plan = make_plan([cnn], {cnn.name: whole(cnn)}, placement="shared-objects")
    naive = make_plan([cnn], {cnn.name: whole(cnn)}, reuse=False, placement="shared-objects")
    assert len(plan["buffers"]) < len(naive["buffers"])
    manifest = derive(plan, {cnn.name: cnn}, tmp_path)
    # edges of one buffer share its offset; buffers never overlap
    for e_name, e in manifest.edges.items():
        assert e.offset == manifest.buffers[e.buffer].offset
    place = arena.place([b["bytes"] for b in plan["buffers"]])
    for a in range(len(plan["buffers"])):
        for b in range(a + 1, len(plan["buffers"])):
            assert arena.disjoint(place, a, b)
    check_equal(measure(tmp_path, frames=2, threads=1), plan)


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
        one = manifest.edges[name[:-3] + "(1)"].buffer
        assert one != manifest.edges[name].buffer
    result = measure(tmp_path / "dep", frames=5)   # odd count: both parities, uneven end
    check_equal(result, plan)
    assert result["frame_ms_median"] == {}     # stage threads overlap frames: no per-frame time


def test_sequential_partitions(tmp_path):
    cnn = tiny_cnn(tmp_path)
    plan = make_plan([cnn], {cnn.name: alternate(cnn)}, split={cnn.name: 5})
    derive(plan, {cnn.name: cnn}, tmp_path / "dep")
    check_equal(measure(tmp_path / "dep", frames=2, threads=1), plan)


def test_multi_cnn_round_robin(tmp_path):
    a = tiny_cnn(tmp_path, "a", seed=1)
    b = tiny_cnn(tmp_path, "b", seed=2, shape=(1, 3, 12, 20), classes=5)
    plan = make_plan([a, b], {"a": all_parts(a), "b": whole(b)})
    derive(plan, {"a": a, "b": b}, tmp_path / "dep")
    result = measure(tmp_path / "dep", frames=5, threads=1)
    check_equal(result, plan)
    assert set(result["fps"]) == {"a", "b"}
    # the two CNNs never run at the same time: their edges share arena bytes
    regions = {e: (buf["offset"], buf["offset"] + buf["bytes"]) for buf in plan["buffers"]
               for e in buf["edges"]}
    assert any(x.startswith("a.") and y.startswith("b.") and rx[0] < ry[1] and ry[0] < rx[1]
               for x, rx in regions.items() for y, ry in regions.items())


def test_fp16_arena(cnn, deployed, tmp_path):
    plan = make_plan([cnn], {cnn.name: all_parts(cnn)}, data_bytes=2)
    fp32 = make_plan([cnn], {cnn.name: all_parts(cnn)})
    assert plan["buffer_bytes"] * 2 == fp32["buffer_bytes"]
    manifest = derive(plan, {cnn.name: cnn}, tmp_path)
    assert manifest.dtype == "float16"
    result = measure(tmp_path, frames=2, threads=1)
    assert result["arena_bytes"] == plan["buffer_bytes"]
    # fp16 storage: relative error about 2^-11 per rounding; softmax outputs are <= 1
    assert result["max_abs_diff"][cnn.name] < 5e-3
    # ONNX Runtime's CPU kernels compute in fp32: the run says so; the weights are held in
    # fp16 (biases and BatchNorm vectors in fp32), in the same NCHWc blocks as the fp32
    # deployment's (padded to whole blocks): about half its bytes
    assert any("fp32" in note for note in result["notes"])
    full = measure(deployed(fp32)[1], frames=2, threads=1)["param_bytes"]
    assert 0.5 * full <= result["param_bytes"] <= 0.6 * full, (result["param_bytes"], full)


def _ref_pool_or_conv(op, x, w, k, pad, count_include_pad=0):
    """Output rows of a 3x3 stride-1 window op over x [H, W] with `pad` on every side."""
    h, wd = x.shape
    fill = -np.inf if op == "MaxPool" else 0.0
    xp = np.pad(x, pad, constant_values=fill)
    real = np.pad(np.ones_like(x), pad)
    out = np.zeros((h, wd), np.float32)
    for i in range(h):
        for j in range(wd):
            win, cnt = xp[i:i + k, j:j + k], real[i:i + k, j:j + k]
            if op == "Conv":
                out[i, j] = np.sum(win * w)
            elif op == "MaxPool":
                out[i, j] = np.max(win)
            else:
                out[i, j] = np.sum(win) / (k * k if count_include_pad else np.sum(cnt))
    return out


@pytest.mark.parametrize("op", ["Conv", "MaxPool", "AveragePool"])
def test_one_part_model_serves_every_phase(op):
    """One part model per layer: top border, interior and bottom border phases all run the
    same model, fed the slots and the 0/1 mask derive writes; each equals numpy's row."""
    import onnxruntime as ort
    from csdf.model import Layer
    from deploy.steps.parts import needs_mask, window_rows
    rng = np.random.default_rng(3)
    w = rng.standard_normal((1, 1, 3, 3)).astype(np.float32)
    hyper = {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1]}
    if op == "Conv":
        hyper["group"] = 1
    layer = Layer("c", op, hyper, {"W": w} if op == "Conv" else {}, ["x"], (1, 1, 5, 4))
    x = (rng.standard_normal((1, 1, 5, 4)) - 1.0).astype(np.float32)   # mostly negative
    want = _ref_pool_or_conv(op, x[0, 0], w[0, 0], 3, 1)

    class _Cnn:   # the two CNN queries window_rows makes
        def layer(self, name):
            return layer

        def edge_shape(self, src, dst):
            return (1, 1, 5, 4)
    cnn = _Cnn()
    assert needs_mask(cnn, "c", "x")
    ring = np.ascontiguousarray(x.transpose(2, 0, 1, 3))             # 5 slots, row r at r
    model = step_model(layer, [InPort("in0", (1, 1, 5, 4), "hncw", 5, 3, True)],
                       [OutPort("out0", (1, 1, 5, 4), "hncw", True)], "float32", part=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for p in range(5):
        rows, real = window_rows(cnn, "c", "x", p)
        idx = np.array([r if ok else 0 for r, ok in zip(rows, real)], np.int32)
        got = sess.run(None, {"in0": ring, "in0_idx": idx,
                              "in0_mask": np.array(real, np.int32)})[0]
        np.testing.assert_allclose(got[0, 0, 0], want[p], atol=1e-5, err_msg=f"phase {p}")


def test_no_border_variant_models_and_one_weight_copy(cnn, deployed):
    """All layers by parts: one model file per layer, and the weights the sessions are
    given (plain NCHW kernels: no reordering) are the CNN's parameters exactly once."""
    plan = make_plan([cnn], {cnn.name: all_parts(cnn)})
    manifest, dep = deployed(plan)
    layers = [m.layer for m in manifest.models.values()]
    assert len(layers) == len(set(layers))
    assert all(m.variant in ("whole", "part") for m in manifest.models.values())
    result = measure(dep, frames=2, layout="nchw", threads=1)
    assert result["param_bytes"] == 4 * cnn.param_count
    assert result["max_abs_diff"][cnn.name] < TOL


def test_bad_plans(cnn, tmp_path):
    plan = make_plan([cnn], {cnn.name: whole(cnn)})
    broken = json.loads(json.dumps(plan))
    broken["edges"].pop(next(iter(broken["edges"])))
    with pytest.raises(InputError, match="no entry for edge"):
        derive(broken, {cnn.name: cnn}, tmp_path / "a")
    small = json.loads(json.dumps(plan))
    name = next(iter(small["edges"]))
    small["buffers"][small["edges"][name]["buffer"]]["bytes"] = 4
    with pytest.raises(InputError, match="cannot hold|needs"):
        derive(small, {cnn.name: cnn}, tmp_path / "b")
    odd = json.loads(json.dumps(plan))
    odd["data_bytes"] = 3
    with pytest.raises(InputError, match="key 'data_bytes' must be 4 \\(fp32\\), 2 \\(fp16\\) or 1 \\(int8\\)"):
        derive(odd, {cnn.name: cnn}, tmp_path / "c")


def test_cli_run_json(cnn, deployed, tmp_path, capsys):
    import shutil
    from explorer.cli.main import main
    plan = make_plan([cnn], {cnn.name: alternate(cnn)})
    shutil.copytree(deployed(plan)[1], tmp_path, dirs_exist_ok=True)   # the run writes run.json
    assert main(["run", str(tmp_path), "--frames", "2", "--json", "--in-process"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"fps", "arena_bytes", "param_bytes", "max_abs_diff", "calls_per_frame",
                        "peak_rss_bytes"}
    assert out["arena_bytes"] == plan["buffer_bytes"]
    assert main(["run", str(tmp_path / "missing")]) == 2


@pytest.mark.parametrize("layout", ["nchw", "auto"])
def test_layouts_give_equal_outputs(cnn, deployed, layout):
    """Plain NCHW kernels, or per step the faster of NCHWc and NCHW: same arena, same calls,
    outputs still equal the reference; "auto" records one choice per step model file."""
    from deploy.runtime import manifest as mf
    from deploy.ort.backend import OrtBackend
    from deploy.runtime.executor import Executor
    plan = make_plan([cnn], {cnn.name: alternate(cnn)})
    manifest, dep = deployed(plan)
    check_equal(measure(dep, frames=2, layout=layout, threads=1), plan)
    if layout == "auto":
        be = OrtBackend("float32", threads=1, layout="auto")
        Executor(mf.load(dep), dep, be)
        used = {str(dep / s.model) for p in manifest.partitions for s in p.steps
                if s.model}
        assert set(be.chosen) == used
        assert set(be.chosen.values()) <= {"nchwc", "nchw"}


def _touches(manifest):
    """Replay the manifest's steps: per step, the (edge, unit) it writes and reads, a unit
    being one row of an edge stored by rows with a slot per row (hncw, slots = height) and
    the whole edge otherwise; with each unit's arena bytes. Written from the bindings alone
    (slot ranges written, slot indices gathered), independent of explorer/memory/staircase.py."""
    edges = manifest.edges
    by_row = {n for n, e in edges.items() if e.layout == "hncw" and e.slots == e.shape[2]}

    def units(name, rows):
        e = edges[name]
        if name not in by_row:
            return [((name, 0), e.offset, e.offset + e.bytes)]
        return [((name, r), e.offset + r * e.row_bytes, e.offset + (r + 1) * e.row_bytes)
                for r in rows]

    steps = []
    for step in manifest.partitions[0].steps:
        consts = {b.name: b.values for b in step.bind if b.kind == "const"}
        writes, reads = [], []
        for b in step.bind:
            if b.kind == "frame":
                writes += units(b.edges[0], range(edges[b.edges[0]].slots))
            elif b.kind == "edge":
                name = b.edges[0]
                if b.name.startswith("out"):
                    writes += units(name, range(b.slot, b.slot + b.shape[0]))
                else:
                    rows = consts.get(f"{b.name}_idx", range(b.slot, b.slot + b.shape[0]))
                    reads += units(name, rows)
        steps.append((writes, reads))
    return steps


def _replay_overwrites(manifest) -> tuple[list, int]:
    """Every write that lands on bytes of another edge's unit still to be read (a
    clobber; must be none), and how many writes land on bytes of another edge whose whole
    interval (first write .. last read of the edge) is still open, which rectangle
    lifetimes would forbid (the staircase's gain)."""
    steps = _touches(manifest)
    last_read, last_edge_read = {}, {}
    for t, (_, reads) in enumerate(steps):
        for u, _, _ in reads:
            last_read[u] = t
            last_edge_read[u[0]] = t
    held, clobbers, finer = {}, [], 0
    for t, (writes, _) in enumerate(steps):
        for u, a0, a1 in writes:
            for v, (b0, b1) in held.items():
                if v[0] != u[0] and a0 < b1 and b0 < a1:
                    if last_read.get(v, -1) >= t:
                        clobbers.append((t, u, v))
                    elif last_edge_read.get(v[0], -1) >= t:
                        finer += 1
            held[u] = (a0, a1)
    return clobbers, finer


@pytest.mark.parametrize("mode", ["whole", "all_parts", "alternate"])
def test_offsets_arena_is_the_plan(cnn, deployed, mode):
    """The deployment's arena uses the plan's offsets: every edge at its buffer's
    offset, the arena exactly the plan's buffer bytes, no larger than shared objects', and,
    replayed step by step from the manifest's bindings, no write ever lands on a row (or a
    whole edge) another edge still has to read; outputs equal the ONNX model's. By parts,
    some writes land on rows freed early (row-by-row lifetimes, explorer/memory/staircase.py)."""
    phases = {"whole": whole, "all_parts": all_parts, "alternate": alternate}[mode](cnn)
    plan = make_plan([cnn], {cnn.name: phases})
    shared = make_plan([cnn], {cnn.name: phases}, placement="shared-objects")
    assert plan["placement"] == "offsets" and plan["buffer_bytes"] <= shared["buffer_bytes"]
    manifest, dep = deployed(plan)
    assert manifest.arena_bytes == plan["buffer_bytes"]
    for name, e in manifest.edges.items():
        assert e.offset == plan["buffers"][e.buffer]["offset"]
    clobbers, finer = _replay_overwrites(manifest)
    assert clobbers == []
    if mode != "whole":
        assert finer > 0
    check_equal(measure(dep, frames=2, threads=1), plan)

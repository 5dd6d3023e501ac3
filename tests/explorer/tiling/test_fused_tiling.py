"""Fused tiling as a mode of memtrade (explorer/tiling/fused.py, explorer/tiling/genes.py,
deploy/steps/tiles.py, deploy/build/tile_step.py) on a small network with two tiled groups:
per-tile buffers in the plan against a hand count, the group's time against tile coverage counted independently, and the
deployment: outputs equal to the unmodified model, arena = plan, N x M calls per group."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from csdf.tiling import Group, tile_group
from deploy.run.measure import measure
from explorer.app.appfile import load_app
from explorer.cli.main import main
from explorer.tiling.fused import group_ms
from explorer.plan.model import to_json
from explorer.throughput.evaluator import make_evaluator
from explorer.tiling.genes import TiledEvaluation, decode, plan_tiled


def small_net(path) -> None:
    """48 x 40 input: c0 3x3 (8) + LeakyRelu, p1 max 2x2, c2 3x3 (16), c3 1x1 (8), p4 max 2x2,
    c5 3x3 stride 2 (16), global average pool."""
    rng = np.random.default_rng(0)
    nodes, inits, state = [], [], {"x": "input", "c": 3}

    def conv(name, cout, k, s=1):
        w = rng.standard_normal((cout, state["c"], k, k)).astype(np.float32) * np.float32(np.sqrt(2 / (state["c"] * k * k)))
        inits.extend([numpy_helper.from_array(w, name + ".w"),
                      numpy_helper.from_array((rng.standard_normal(cout) * 0.1).astype(np.float32), name + ".b")])
        nodes.append(helper.make_node("Conv", [state["x"], name + ".w", name + ".b"], [name], name=name,
                                      kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4))
        nodes.append(helper.make_node("LeakyRelu", [name], [name + ".act"], name=name + ".act", alpha=0.1))
        state.update(x=name + ".act", c=cout)

    def pool(name):
        nodes.append(helper.make_node("MaxPool", [state["x"]], [name], name=name, kernel_shape=[2, 2], strides=[2, 2]))
        state["x"] = name

    conv("c0", 8, 3), pool("p1"), conv("c2", 16, 3), conv("c3", 8, 1), pool("p4"), conv("c5", 16, 3, 2)
    nodes.append(helper.make_node("GlobalAveragePool", [state["x"]], ["output"], name="gap"))
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 48, 40])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 16, 1, 1])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=7), str(path))


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    root = tmp_path_factory.mktemp("fused")
    small_net(root / "small.onnx")
    (root / "app.yaml").write_text("name: small\nplatform: jetson-tx2\nprecision: fp32\nmemory: 1GB\n"
                                   "cnns:\n  - name: small\n    fps: 0\n    model: small.onnx\n")
    return load_app(str(root / "app.yaml"), mem="1GB")


TWO_GROUPS = [4, 2, 2]   # blocks [c0 p1] [c2 c3 p4] [c5]: 4x4, then one 2x2 group


def test_genes_decode_to_groups(app):
    ev = TiledEvaluation(app, make_evaluator(app), "tiles")
    assert [s.layers for s in ev.slots] == [("c0", "p1"), ("c2", "c3", "p4"), ("c5",)]
    assert ev.tilings(TWO_GROUPS) == {
        "small": [Group(("c0", "p1"), 4, 4), Group(("c2", "c3", "p4", "c5"), 2, 2)]}
    assert decode(app, [0, 4, 0], ev.slots) == {"small": [Group(("c2", "c3", "p4"), 4, 4)]}
    # 7 x 7 on c5's 6 x 5 output: 6 rows in 5 or 4 tiles of ceil(6 / n) = 2 leave the last
    # empty (DeepThings' grid); 3 x 3 is the largest grid that fits
    assert decode(app, [0, 0, 7], ev.slots) == {"small": [Group(("c5",), 3, 3)]}
    # non-square grids follow the squares: GRIDS[v - 1] is (rows, columns) of tiles
    from explorer.tiling.genes import GRIDS
    assert GRIDS[:7] == tuple((v, v) for v in range(1, 8)) and len(set(GRIDS)) == len(GRIDS)
    v = GRIDS.index((1, 3)) + 1
    assert decode(app, [v, v, 0], ev.slots) == {"small": [Group(("c0", "p1", "c2", "c3", "p4"), 1, 3)]}
    # c5's 6 x 5 output: 4 rows of tiles fit 6 rows? ceil(6/4) = 2 leaves the 4th empty -> 3
    assert decode(app, [0, 0, GRIDS.index((4, 2)) + 1], ev.slots) == {"small": [Group(("c5",), 3, 2)]}
    assert max(ev.space.upper) == len(GRIDS)


def test_plan_holds_per_tile_buffers_hand_count(app):
    ev = TiledEvaluation(app, make_evaluator(app), "tiles")
    genes = TWO_GROUPS
    mem, fps = ev(genes)
    plan = plan_tiled(app, ev, genes, fps, True)
    e = {str(k): v for k, v in plan.edges.items()}
    # group 1, 4x4 on p1's 24 x 20 (tiles of 6 x 5): c0 computes 12 x 10 for each
    assert e["small.c0->p1"].elements == 8 * 12 * 10
    # group 2, 2x2 on c5's 6 x 5 (3 rows; 3, 2 columns). Bottom-left tile: c5 rows 3..5 read
    # p4 rows 5..11 (7), columns 0..2 read 0..5 (6); p4 reads c3 rows 10..23, columns 0..11;
    # c3 (1x1) reads the same of c2
    assert e["small.p4->c5"].elements == 8 * 7 * 6
    assert e["small.c3->p4"].elements == 8 * 14 * 12
    assert e["small.c2->c3"].elements == 16 * 14 * 12
    # the group's input and output stay whole tensors
    assert e["small.input->c0"].elements == 3 * 48 * 40
    assert e["small.p1->c2"].elements == 8 * 24 * 20
    assert plan.to_dict()["tilings"] == {"small": [{"layers": ["c0", "p1"], "grid": [4, 4]},
                                                   {"layers": ["c2", "c3", "p4", "c5"], "grid": [2, 2]}]}
    assert plan.memory_bytes == mem == plan.param_bytes + plan.buffer_bytes
    # the per-tile buffers are smaller than whole layers, so tiling saves memory here
    assert mem < ev([0] * len(genes))[0]


def test_group_time_counts_recomputed_halo(app):
    ev = make_evaluator(app)
    cnn = app.cnns["small"]
    group = Group(("c2", "c3", "p4", "c5"), 2, 2)
    whole = {l: ev.layer_ms("small", l, 1, "gpu") for l in group.layers}
    assert group_ms(ev, "small", Group(group.layers, 1, 1), "gpu") == pytest.approx(sum(whole.values()))
    # how often each output pixel of each layer is computed by the 4 tiles, counted pixel by pixel
    tiles = tile_group(cnn, list(group.layers), 2, 2)
    # each extra tile calls every layer once more: one phase overhead each, as by parts
    expect = 3 * len(group.layers) * ev.profile.processors["gpu"].phase_overhead_us * 1e-3
    assert expect > 0
    for k, name in enumerate(group.layers):
        h, w = cnn.layer(name).output_shape[2:]
        cover = np.zeros((h, w), int)
        for t in tiles:
            lt = t.layers[k]
            cover[lt.out_h.start:lt.out_h.stop, lt.out_w.start:lt.out_w.stop] += 1
        assert cover.min() == 1
        expect += whole[name] * cover.sum() / cover.size
        if name != "c5":
            assert cover.max() > 1        # c5's 3x3/2 window overlaps: halo recomputed below it
    assert group_ms(ev, "small", group, "gpu") == pytest.approx(expect)
    assert expect > sum(whole.values())


def test_group_time_with_a_measured_profile_charges_calls_as_phases(app):
    """With measured layer times, an extra tile costs each layer what one more phase costs
    it in the same profile: the slope of its measured time over its phase count."""
    from explorer.throughput.device_profile import DeviceProfile, LayerTimes
    from explorer.throughput.evaluator import Evaluator

    cnn = app.cnns["small"]
    names = [n for n in cnn.order() if n != "input"]
    # c2 measured in a ladder: 2.0 ms whole, 2.0 + 23 * 0.05 ms at 24 phases
    table = {n: LayerTimes(1.0) for n in names}
    table["c2"] = LayerTimes(2.0, by_phases={4: 2.3, 24: 2.0 + 23 * 0.05})
    table["c3"] = LayerTimes(0.5, part_ms=0.04, phases=24)      # one phase timed alone
    table["p4"] = LayerTimes(0.3, by_phases={12: 0.2})           # faster by parts: no charge
    prof = DeviceProfile("m", models={"small": table}, default_phase_us=7.0)
    ev = Evaluator(app, prof, "measured")
    group = Group(("c2", "c3", "p4", "c5"), 2, 2)
    tiles = tile_group(cnn, list(group.layers), 2, 2)
    expect = 0.0
    for k, name in enumerate(group.layers):
        h, w = cnn.layer(name).output_shape[2:]
        computed = sum(t.layers[k].out_h.size * t.layers[k].out_w.size for t in tiles)
        expect += table[name].whole_ms * computed / (h * w)
    calls = 0.05 + (0.04 * 24 - 0.5) / 23 + 0.0 + 0.007      # c2, c3, p4, c5 (default)
    assert group_ms(ev, "small", group, "gpu") == pytest.approx(expect + 3 * calls)


def test_tiled_layers_count_workspace_of_their_largest_tile(app):
    """Measured whole-layer workspace, scaled for a tiled layer by its largest tile's share
    of the output (c2: 24 x 20, 2x2 tiles computing at most 13 x 11 with the halo)."""
    from explorer.throughput.layer_times import from_flat
    from explorer.tiling.fused import derive_tiled
    from explorer.plan.derive import whole_phases

    cnn = app.cnns["small"]
    table = {n: from_flat(1.0, whole_ws_bytes=0) for n in cnn.order() if n != "input"}
    table["c2"] = from_flat(1.0, whole_ws_bytes=24 * 20 * 100)
    table["c0"] = from_flat(1.0, whole_ws_bytes=1000)
    group = Group(("c2", "c3", "p4", "c5"), 2, 2)
    tiles = tile_group(cnn, list(group.layers), 2, 2)
    most = max(t.layers[0].out_h.size * t.layers[0].out_w.size for t in tiles)
    assert most < 24 * 20 // 2
    d = derive_tiled(app, whole_phases(app), {"small": [group]}, None, {"small": table})
    assert d.workspace_bytes == most * 100
    untiled = derive_tiled(app, whole_phases(app), {}, None, {"small": table})
    assert untiled.workspace_bytes == 24 * 20 * 100
    assert d.memory_bytes - d.workspace_bytes == d.param_bytes + d.buffer_bytes


def test_deployed_two_groups_equal_outputs_arena_is_plan(app, tmp_path):
    ev = TiledEvaluation(app, make_evaluator(app), "tiles")
    genes = TWO_GROUPS
    mem, fps = ev(genes)
    plan = plan_tiled(app, ev, genes, fps, True)
    to_json(plan, tmp_path / "plan.json")
    assert main(["deploy", str(tmp_path / "plan.json"), "--out", str(tmp_path / "d")]) == 0
    manifest = json.loads((tmp_path / "d" / "manifest.json").read_text())
    tiled = [s for p in manifest["partitions"] for s in p["steps"] if s.get("tiles")]
    assert [len(s["tiles"]) for s in tiled] == [16, 4]
    # one model per distinct tile shape: corners, edges and the 4 inner tiles share 9 models
    assert len({t["model"] for t in tiled[0]["tiles"]}) == 9
    res = measure(tmp_path / "d", frames=2, warmup=1, threads=1)
    assert res["max_abs_diff"]["small"] < 1e-5
    assert res["arena_bytes"] == plan.buffer_bytes
    # input copy + 16 + 4 tile calls + the global average pool
    assert res["calls_per_frame"]["small"] == 1 + 16 + 4 + 1
    # the TensorRT board runner runs layer and region steps only: one line, nothing written
    assert main(["deploy", str(tmp_path / "plan.json"), "--out", str(tmp_path / "t"),
                 "--backend", "tensorrt"]) == 2
    assert not (tmp_path / "t").exists()


def test_csdf_view_one_actor_per_group(app):
    from csdf.tiled_csdf import tiled_csdf
    from sdf3.repetition import is_consistent, repetition_vector
    from sdf3.xml import read_xml, to_bytes

    cnn = app.cnns["small"]
    groups = [Group(("c0", "p1"), 4, 4), Group(("c2", "c3", "p4", "c5"), 2, 2)]
    g = tiled_csdf(cnn, cnn.order(), {}, groups, "small_all")
    assert sorted(g.actors) == ["c0__p1", "c2__c5", "gap", "input"]
    assert (g.actors["c0__p1"].phases, g.actors["c2__c5"].phases) == (16, 4)
    assert [c.name for c in g.channels] == ["input->c0", "p1->c2", "c5->gap"]
    # each tile row's first tile consumes the input rows it newly reaches; the last tile of a
    # tile row produces its output rows; per iteration the whole tensors move once
    into = g.channel("p1->c2")
    assert sum(g.channel("input->c0").cons) == 48 and sum(into.prod) == 24 and sum(into.cons) == 24
    assert into.prod == [0, 0, 0, 6] * 4
    assert g.channel("c5->gap").prod == [0, 3, 0, 3]
    assert is_consistent(g) and repetition_vector(g) == {"input": 1, "c0__p1": 16, "c2__c5": 4, "gap": 1}  # N x M firings
    back = read_xml(to_bytes(g))
    assert back.channel("p1->c2").cons == into.cons


def test_explore_tiling_flag_writes_a_deployable_plan(app, tmp_path):
    """explore APP --tiling tiles: the plan names its groups; deployed, outputs are equal."""
    rc = main([str(app.path), "--mem", "1KB", "--tiling", "tiles", "--population", "8",
               "--generations", "2", "--seed", "3", "--out", str(tmp_path / "x"), "--quiet"])
    assert rc in (0, 3)
    plan = json.loads((tmp_path / "x" / "plan.json").read_text())
    assert plan["tilings"]["small"]
    assert "FusedTiles" in (tmp_path / "x" / "small.all.xml").read_text()
    assert main(["deploy", str(tmp_path / "x" / "plan.json"), "--out", str(tmp_path / "d")]) == 0
    res = measure(tmp_path / "d", frames=1, warmup=1, threads=1)
    assert res["max_abs_diff"]["small"] < 1e-5 and res["arena_bytes"] == plan["buffer_bytes"]


@pytest.mark.parametrize("genes", [
    [1, 1, 0, 0, 0, 0] + [0, 2, 2],      # c0, p1 by rows feed a 2x2 group (input stored rows first)
    [0, 0, 1, 1, 1, 1] + [2, 0, 0],      # a 2x2 group feeds c2 .. c5 by rows (output rows first)
])
def test_groups_beside_row_parts(app, tmp_path, genes):
    ev = TiledEvaluation(app, make_evaluator(app), "both", "binary")
    mem, fps = ev(genes)
    plan = plan_tiled(app, ev, genes, fps, True)
    assert plan.tilings and any(n > 1 for n in plan.phases["small"].values())
    to_json(plan, tmp_path / "plan.json")
    assert main(["deploy", str(tmp_path / "plan.json"), "--out", str(tmp_path / "d")]) == 0
    res = measure(tmp_path / "d", frames=1, warmup=1, threads=1)
    assert res["max_abs_diff"]["small"] < 1e-5 and res["arena_bytes"] == plan.buffer_bytes


def test_non_square_grid_deploys_with_equal_outputs(app, tmp_path):
    """A 3 x 2 grid (3 rows of 2 tiles) from the genes: 6 tile calls, outputs equal."""
    from explorer.tiling.genes import GRIDS
    ev = TiledEvaluation(app, make_evaluator(app), "tiles")
    v = GRIDS.index((3, 2)) + 1
    genes = [v, v, 0]
    assert ev.tilings(genes) == {"small": [Group(("c0", "p1", "c2", "c3", "p4"), 3, 2)]}
    mem, fps = ev(genes)
    plan = plan_tiled(app, ev, genes, fps, True)
    to_json(plan, tmp_path / "plan.json")
    assert main(["deploy", str(tmp_path / "plan.json"), "--out", str(tmp_path / "d")]) == 0
    res = measure(tmp_path / "d", frames=1, warmup=1, threads=1)
    assert res["max_abs_diff"]["small"] < 1e-5 and res["arena_bytes"] == plan.buffer_bytes
    assert res["calls_per_frame"]["small"] == 1 + 6 + 1 + 1     # input, tiles, c5, gap

"""One buffer per tensor: a tensor read by several layers is stored once, its
ring sized for all readers, written once per frame, and the reuse-only plan of every zoo
CNN needs no more than the most elements alive at once in the plain topological order."""
from __future__ import annotations

import shutil
from itertools import accumulate
from math import prod

import pytest

from csdf import zoo
from csdf.onnx_import import load_onnx
from csdf.partition_analysis import ring_rows
from csdf.parts import all_parts, part_rows
from csdf.to_csdf import edge_windows
from deploy.build.derive import derive as deploy
from deploy.run.measure import measure
from explorer.app.appfile import load_app
from explorer.memory.buffers import buffer_elements
from explorer.plan.derive import derive, uniform_phases
from onnx_cases import fan_out_block
from deploy_fixtures import make_plan

TOL = 1e-4


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return load_onnx(str(fan_out_block(tmp_path_factory.mktemp("fan") / "fan.onnx")), "fan")


def _stem(cnn) -> str:
    return next(x for x in cnn.order() if cnn.graph.out_degree(x) == 3)


def _phase_sets(cnn):
    rows = all_parts(cnn)
    yield "row by row", rows
    yield "parts of 3", {n: (-(-int(cnn.layer(n).output_shape[2]) // 3) if k > 1 else 1)
                         for n, k in rows.items()}
    mixed = {n: 1 for n in cnn.order()}
    mixed[_stem(cnn)] = rows[_stem(cnn)]
    yield "stem by parts", mixed
    readers = dict(rows)
    readers[_stem(cnn)] = 1
    yield "readers by parts", readers


def _brute_ring(cnn, plan, src):
    """Replay the plan's firings row by row: the most rows of `src` that some reader still
    needs (a row is freed once no reader reads it or an earlier row again), rounded to whole
    producer parts; and whether a ring of the plan's size ever loses a row a reader still
    reads (slot r % S overwritten)."""
    firings = plan["firings"]["fan.all"]
    phases = plan["phases"]["fan"]
    order = cnn.order()
    windows = edge_windows(cnn, order, {x: phases[x] for x in order})
    height = int(cnn.layer(src).output_shape[2])
    steps = {x: [t for t, f in enumerate(firings) if f == x] for x in order}
    claim = [t for p, t in enumerate(steps[src]) for _ in part_rows(height, phases[src], p)]
    readers = [d for d in order if cnn.graph.has_edge(src, d)]
    last = [-1] * height
    for d in readers:
        for t, rows in zip(steps[d], windows[(src, d)]):
            for r in rows:
                if 0 <= r < height:
                    last[r] = max(last[r], t)
    free = [max(c, f) for c, f in zip(claim, accumulate(last, max))]
    events = sorted([(c, 1) for c in claim] + [(f + 1, -1) for f in free])
    held = max(accumulate(d for _, d in events))
    size = plan["edges"][f"fan.{src}->{readers[0]}"]["rows"]
    slot: dict[int, int] = {}
    lost = False
    for t, layer in enumerate(firings):
        if layer == src:
            for r in part_rows(height, phases[src], steps[src].index(t)):
                slot[r % size] = r
        if layer in readers:
            for r in windows[(src, layer)][steps[layer].index(t)]:
                lost |= 0 <= r < height and slot.get(r % size) != r
    k = len(part_rows(height, phases[src], 0))
    return ring_rows(held, k, height), lost


def test_three_readers_share_one_ring_of_the_replayed_size(cnn):
    stem = _stem(cnn)
    seen = set()
    for label, phases in _phase_sets(cnn):
        plan = make_plan([cnn], {"fan": phases})
        edges = {n: e for n, e in plan["edges"].items() if n.startswith(f"fan.{stem}->")}
        assert len(edges) == 3
        assert len({e["buffer"] for e in edges.values()}) == 1, label
        assert len({e["rows"] for e in edges.values()}) == 1, label
        want, lost = _brute_ring(cnn, plan, stem)
        assert next(iter(edges.values()))["rows"] == want, label
        assert not lost, label
        seen.add(want)
    assert len(seen) > 1           # the phase sets give different rings


def _writes(manifest, layer):
    """Output bindings (not the CNN's output) of every step of `layer`, and rows written."""
    binds, rows = [], 0
    for part in manifest.partitions:
        for step in part.steps:
            if step.layer != layer:
                continue
            outs = [b for b in step.bind if b.kind in ("edge", "frame")
                    and (b.kind == "frame" or b.name.startswith("out"))]
            binds.append(len(outs))
            for b in outs:
                e = manifest.edges[b.edges[0]]
                hncw = b.kind == "edge" and e.layout == "hncw"
                rows += b.shape[0] if hncw else e.shape[2]
    return binds, rows


@pytest.mark.parametrize("label", ["whole", "row by row", "parts of 3", "readers by parts"])
def test_fan_out_deploys_writing_each_tensor_once(cnn, tmp_path, label):
    phases = {n: 1 for n in cnn.order()} if label == "whole" else dict(_phase_sets(cnn))[label]
    plan = make_plan([cnn], {"fan": phases})
    out = tmp_path / "dep"
    manifest = deploy(plan, {"fan": cnn}, out)
    result = measure(out, frames=2, threads=1)
    assert result["max_abs_diff"]["fan"] < TOL
    assert result["arena_bytes"] == plan["buffer_bytes"]
    for layer in cnn.order():
        if cnn.graph.out_degree(layer) == 0:
            continue
        binds, rows = _writes(manifest, layer)
        assert binds == [1] * phases[layer], layer
        assert rows == int(cnn.layer(layer).output_shape[2]), layer
    pair = make_plan([cnn], {"fan": phases}, placement="shared-objects")
    shutil.rmtree(out)
    paired = deploy(pair, {"fan": cnn}, out)       # the paper's model: once per reader
    assert _writes(paired, _stem(cnn))[0] == [3] * phases[_stem(cnn)]
    assert measure(out, frames=1, threads=1)["max_abs_diff"]["fan"] < TOL


@pytest.mark.parametrize("parts", [False, True])
def test_fan_out_crossing_a_pipeline_is_double_buffered_once(cnn, tmp_path, parts):
    order = cnn.order()
    stem = _stem(cnn)
    cut = order.index(stem) + 3           # the stem and one reader in the first stage
    phases = all_parts(cnn) if parts else {n: 1 for n in order}
    plan = make_plan([cnn], {"fan": phases}, split={"fan": cut}, pipelined=True)
    readers = [d for d in order if cnn.graph.has_edge(stem, d)]
    assert {order.index(d) < cut for d in readers} == {True, False}
    held = {n: e for n, e in plan["edges"].items() if n.startswith(f"fan.{stem}->")}
    assert sorted(held) == sorted(f"fan.{stem}->{d}({k})" for d in readers for k in (1, 2))
    buffers = {e["buffer"] for e in held.values()}
    assert len(buffers) == 2
    for k in buffers:
        assert sorted(plan["buffers"][k]["edges"]) == sorted(n for n, e in held.items()
                                                            if e["buffer"] == k)
    deploy(plan, {"fan": cnn}, tmp_path / "dep")
    result = measure(tmp_path / "dep", frames=3, threads=1)
    assert result["max_abs_diff"]["fan"] < TOL
    assert result["arena_bytes"] == plan["buffer_bytes"]


def live_peak(cnn) -> int:
    """Most elements alive at once when every tensor is held once, from its producer to its
    last reader, in the CNN's plain topological order (no planner involved)."""
    order = cnn.order()
    at = {x: i for i, x in enumerate(order)}
    alive = [0] * len(order)
    for x in order:
        readers = list(cnn.graph.successors(x))
        if readers:
            size = prod(int(v) for v in cnn.edge_shape(x, readers[0]))
            for i in range(at[x], max(at[d] for d in readers) + 1):
                alive[i] += size
    return max(alive)


ISSUE = {"resnet50": 2_408_448, "densenet121": 1_806_336, "densenet121_tv": 2_107_392,
         "mobilenet_v2": 1_505_280}


@pytest.mark.parametrize("net", zoo.NAMES + zoo.TRUNKS)
def test_reuse_only_is_within_the_per_tensor_live_peak(net, tmp_path):
    path = tmp_path / "app.yaml"
    path.write_text(f"name: {net}\ncnns:\n  - {{name: net, model: 'zoo:{net}'}}\n")
    app = load_app(path, mem="0")
    peak = live_peak(app.cnns["net"])
    if net in ISSUE:
        assert peak == ISSUE[net]
    reuse = buffer_elements(derive(app, uniform_phases(app, False)).buffers)
    assert reuse <= peak

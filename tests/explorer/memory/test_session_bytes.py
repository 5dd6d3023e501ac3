"""Session state in the plan's memory (explorer/throughput/runtime_costs.session_bytes):
every loaded step model keeps its session, so with a measured profile the plan counts each
layer's model once (a layer by parts whose last part is shorter: two part models), on top of
parameters, buffers and workspace. Figures here are computed from the table in the test."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from deploy.build.derive import derive as deploy
from deploy.ort.backend import OrtBackend
from deploy.runtime.executor import Executor
from explorer.throughput.runtime_costs import parity_bound, session_bytes
from explorer.plan.derive import derive
from explorer.throughput.layer_times import from_flat
from deploy_fixtures import make_app, plan_of, tiny_cnn


def table(cnn) -> dict:
    """Made-up measurements: whole 1000 + 10 i bytes, a part model 5000 + 10 i."""
    out = {}
    for i, name in enumerate(cnn.order()):
        out[name] = from_flat(1.0, part_ms=0.1, phases=int(cnn.layer(name).output_shape[2]),
                              whole_session_bytes=1000 + 10 * i,
                              part_session_bytes=5000 + 10 * i)
    return out


def test_session_state_is_counted_per_loaded_model(tmp_path):
    cnn = tiny_cnn(tmp_path)
    app = make_app([cnn], split={"tiny": 5}, pipelined=True)     # two partitions, one set
    tables = {"tiny": table(cnn)}
    order = cnn.order()
    # conv1 (16 rows) in 4 parts of 4; dw2 (8 rows) in 3 parts: 3, 3 and a last of 2
    phases = {"tiny": {n: 1 for n in order} | {"conv1": 4, "dw2": 3}}
    i = {n: k for k, n in enumerate(order)}
    expected = sum(1000 + 10 * i[n] for n in order if n not in ("x", "conv1", "dw2"))  # x: Input
    expected += (5000 + 10 * i["conv1"]) + 2 * (5000 + 10 * i["dw2"])
    assert session_bytes(app, phases, tables) == expected
    d = derive(app, phases, None, tables)
    assert d.session_bytes == expected
    assert d.memory_bytes == (d.param_bytes + d.buffer_bytes + d.workspace_bytes + expected
                              + d.output_bytes)
    assert session_bytes(app, phases, None) == 0           # no profile: nothing measured


def test_every_call_of_a_frame_counts_its_binding(tmp_path):
    """With a profile that measured what a call holds (LayerBytes.call_bytes: its ONNX
    Runtime binding, deploy/profile/ladder.py), each layer adds that for each of its Φ calls
    (a whole layer one; the frame copy, no binding, none), on top of its session state."""
    cnn = tiny_cnn(tmp_path)
    app = make_app([cnn])
    order = cnn.order()
    tables = {"tiny": table(cnn)}
    phases = {"tiny": {n: 1 for n in order} | {"conv1": 4, "dw2": 3}}
    without = session_bytes(app, phases, tables)
    for k, name in enumerate(order):
        t = tables["tiny"][name]
        t.bytes = replace(t.bytes, call_bytes=300 + k)
    calls = sum((300 + k) * phases["tiny"][n] for k, n in enumerate(order) if n != "x")
    assert calls == sum(300 + k for k in range(1, len(order))) + 3 * (300 + order.index("conv1")) \
        + 2 * (300 + order.index("dw2"))
    assert session_bytes(app, phases, tables) == without + calls


def test_layers_by_parts_count_their_measured_models(tmp_path):
    """With a profile that measured its ladder's by-parts step models (LayerBytes.band_*:
    every layer by parts; alone_*: neighbours whole; per Φ of the ladder), a layer by parts
    beside another by parts in its partition counts its band figures at the nearest measured
    Φ, a layer by parts alone (or whose neighbour by parts is in another partition) its alone
    figures, a layer with neither its part model's, and a whole layer beside a layer by parts
    in its partition its `beside_*` figures (its model reads or writes a rows ring)."""
    cnn = tiny_cnn(tmp_path)
    order = cnn.order()
    i = {n: k for k, n in enumerate(order)}

    def times(n: str, alone: bool):
        return from_flat(1.0, part_ms=0.1, phases=int(cnn.layer(n).output_shape[2]),
                         whole_ws_bytes=100 + i[n], part_ws_bytes=200 + i[n],
                         whole_session_bytes=1000 + 10 * i[n], part_session_bytes=5000 + 10 * i[n],
                         band_session_bytes={2: 7000 + 10 * i[n], 8: 9000 + 10 * i[n]},
                         band_ws_bytes={2: 3000 + i[n], 8: 4000 + i[n]},
                         alone_session_bytes={2: 6000 + 10 * i[n]} if alone else {},
                         alone_ws_bytes={2: 3500 + i[n]} if alone else {},
                         beside_session_bytes=8000 + 10 * i[n], beside_ws_bytes=50 + i[n])

    def beside(phases: dict, members) -> set[str]:
        """Whole layers with a neighbour by parts in their partition (counted `beside_*`)."""
        return {n for n in members if phases[n] == 1 and n != "x" and any(
            phases[m] > 1 for m in set(cnn.graph.predecessors(n)) | set(cnn.graph.successors(n))
            if m in members)}

    tables = {"tiny": {n: times(n, n != "pw3") for n in order}}
    # conv1 (Φ 4: nearest 2) and dw2 (Φ 3: nearest 2) are neighbours by parts; pool4 (Φ 2)
    # has none by parts (se_mul and cat6 whole)
    phases = {"tiny": {n: 1 for n in order} | {"conv1": 4, "dw2": 3, "pool4": 2}}
    whole = [n for n in order if n not in ("x", "conv1", "dw2", "pool4")]
    one = make_app([cnn])
    near = beside(phases["tiny"], order)
    assert near == {"pw3", "add3", "se_mul", "cat6"}
    expected = (sum((8000 if n in near else 1000) + 10 * i[n] for n in whole) + (7000 + 10 * i["conv1"])
                + (7000 + 10 * i["dw2"]) + (6000 + 10 * i["pool4"]))
    assert session_bytes(one, phases, tables) == expected
    d = derive(one, phases, None, tables)
    assert d.session_bytes == expected
    assert d.workspace_bytes == max(3000 + i["dw2"], 3500 + i["pool4"])
    # conv1 whole and a partition boundary between dw2 and pw3, both by parts: dw2's only
    # neighbour by parts is in another stage: alone; pw3 has no alone figures: its part model
    two = make_app([cnn], split={"tiny": 3}, pipelined=True)
    assert [p.layers[-1] for p in two.partitions][0] == "dw2"
    phases = {"tiny": {n: 1 for n in order} | {"dw2": 2, "pw3": 2}}
    pw3_models = 1 if int(cnn.layer("pw3").output_shape[2]) % 2 == 0 else 2
    near = set().union(*(beside(phases["tiny"], p.layers) for p in two.partitions))
    assert near == {"conv1", "add3"}
    expected = (sum((8000 if n in near else 1000) + 10 * i[n] for n in order
                    if n not in ("x", "dw2", "pw3"))
                + (6000 + 10 * i["dw2"]) + pw3_models * (5000 + 10 * i["pw3"]))
    assert session_bytes(two, phases, tables) == expected
    # filed per side: conv1 whole writes dw2's rows ring ("out"), add3 reads pw3's ("in")
    for n in ("conv1", "add3"):
        t = tables["tiny"][n]
        t.bytes = replace(t.bytes, beside_session_bytes={"in": 100 + i[n], "out": 200 + i[n],
                                                         "both": 300 + i[n]})
    expected += (200 + i["conv1"]) - (8000 + 10 * i["conv1"])
    expected += (100 + i["add3"]) - (8000 + 10 * i["add3"])
    assert session_bytes(two, phases, tables) == expected


def test_the_cnn_outputs_are_counted_with_the_runtime_bytes(tmp_path):
    """The executor hands each CNN's outputs over in arrays outside the arena (two when its
    stages pipeline frames): with measured tables the plan counts them; without, nothing."""
    from explorer.throughput.runtime_costs import output_bytes
    cnn = tiny_cnn(tmp_path)
    tables = {"tiny": table(cnn)}
    sinks = [n for n in cnn.order() if cnn.graph.out_degree(n) == 0]
    one_copy = sum(int(np.prod(cnn.layer(n).output_shape)) for n in sinks) * 4
    assert one_copy > 0
    assert output_bytes(make_app([cnn]), tables) == one_copy
    assert output_bytes(make_app([cnn], split={"tiny": 5}, pipelined=True), tables) == 2 * one_copy
    assert output_bytes(make_app([cnn], split={"tiny": 5}, pipelined=False), tables) == one_copy
    assert output_bytes(make_app([cnn]), None) == 0
    phases = {"tiny": {n: 1 for n in cnn.order()}}
    d = derive(make_app([cnn]), phases, None, tables)
    assert d.output_bytes == one_copy
    assert d.memory_bytes == (d.param_bytes + d.buffer_bytes + d.workspace_bytes
                              + d.session_bytes + one_copy)


@pytest.mark.parametrize("pipelined,placement", [(True, "offsets"), (True, "shared-objects"),
                                                 (False, "offsets")])
def test_the_layers_bound_per_parity_are_the_deployments(tmp_path, pipelined, placement):
    """parity_bound names exactly the layers whose steps the executor binds twice (a view
    per frame parity): the ends of a tensor stored twice across a pipeline (with one buffer
    per tensor, every reader of it) and a pipelined CNN's output layer; none in one
    partition or without a pipeline. The cut puts one reader of add3 (se_gap) beside it and
    one (se_mul) across: se_gap binds per parity with one buffer per tensor only."""
    cnn = tiny_cnn(tmp_path)
    app = make_app([cnn], split={"tiny": 7}, pipelined=pipelined, placement=placement)
    order = cnn.order()
    phases = {"tiny": {n: 1 for n in order} | {"conv1": 4, "dw2": 3}}
    manifest = deploy(plan_of(app, phases), {"tiny": cnn}, tmp_path / "dep")
    ex = Executor(manifest, tmp_path / "dep", OrtBackend(manifest.dtype, 1))
    bound: dict[str, set[bool]] = {}
    for part in manifest.partitions:
        for i, step in enumerate(part.steps):
            if step.model:
                apart = ex.views[(part.name, i, 0)] is not ex.views[(part.name, i, 1)]
                bound.setdefault(step.layer, set()).add(apart)
    assert all(len(v) == 1 for v in bound.values())      # every phase of a layer alike
    twice = {name for name, v in bound.items() if True in v}
    want = set().union(*(parity_bound(app, p, cnn) for p in app.partitions))
    assert twice == want, (twice, want)
    assert bool(twice) == pipelined
    tables = {"tiny": table(cnn)}
    for k, name in enumerate(order):
        t = tables["tiny"][name]
        t.bytes = replace(t.bytes, call_bytes=300 + k)
    calls = sum((300 + k) * phases["tiny"][n] * (2 if n in twice else 1)
                for k, n in enumerate(order) if n != "x")
    without = {"tiny": table(cnn)}
    assert session_bytes(app, phases, tables) == session_bytes(app, phases, without) + calls

"""Memory at each layer's precision (explorer/memory/layer_bytes.py, explorer/app/
layer_precision.py): every tensor counts at its producer's bytes, a CNN input at the widest
of its readers', every parameter at its layer's; figures here are computed from the graph's
own shapes and parameters, independently of the memory model."""
from __future__ import annotations

from dataclasses import replace

import pytest

import memtrade
from onnx_cases import branches_block
from explorer.app.layer_precision import LADDER, LayerPrecisions, uniform
from explorer.app.model import PRECISIONS
from explorer.plan.derive import derive, plan_for, whole_phases
from explorer.plan.plan_file import from_dict
from sdf3.errors import InputError

BYTES = {"fp32": 4, "fp16": 2, "int8": 1}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    path = branches_block(tmp_path_factory.mktemp("layer_bytes") / "branches.onnx")
    return memtrade.load_app({"name": "branches", "platform": "jetson-tx2", "precision": "auto",
                              "min_sqnr_db": 20, "cnns": [{"name": "n", "model": str(path)}]})


def _assignments():
    """Each layer's precision, a table of mixes (each layer through every precision)."""
    layers = ("a", "b", "s", "c")
    mixes = [dict(zip(layers, LADDER[k:] + LADDER[:k] + LADDER[:1])) for k in range(3)]
    return mixes + [dict(zip(layers, p)) for p in (("int8", "fp32", "int8", "fp16"),
                                                  ("fp16", "fp16", "int8", "int8"))]


@pytest.mark.parametrize("placement", ["shared-objects", "offsets"])
@pytest.mark.parametrize("mix", _assignments())
def test_each_tensor_and_weight_at_its_layers_bytes(app, placement, mix):
    app = replace(app, placement=placement)
    cnn = app.cnns["n"]
    d = derive(app, whole_phases(app), layers=LayerPrecisions.of({"n": mix}))
    width = {k: BYTES[v] for k, v in mix.items()}
    (inp,) = [l.name for l in cnn.layers() if l.op == "Input"]
    width[inp] = max(width["a"], width["b"])          # the input: its widest reader
    for use in d.uses:
        src = use.name.split(".", 1)[1].split("->")[0]
        n, c, h, w_ = cnn.layer(src).output_shape
        assert use.size == n * c * h * w_ * width[src], use.name
    params = sum(p.size * width[l.name] for l in cnn.layers() for p in l.params.values())
    assert d.param_bytes == params
    if placement == "shared-objects":         # the arena: each buffer at its widest tensor
        size = {u.name: u.size for u in d.uses}
        assert d.buffer_bytes == sum(max(size[e] for e in b.edges) for b in d.buffers)
    assert d.memory_bytes == (d.param_bytes + d.buffer_bytes + d.workspace_bytes
                              + d.session_bytes + d.output_bytes)


@pytest.mark.parametrize("name", LADDER)
def test_one_precision_everywhere_is_that_precisions_plan(app, name):
    one = derive(replace(app, precision=PRECISIONS[name]), whole_phases(app))
    per_layer = derive(app, whole_phases(app), layers=uniform(app.cnns, name))
    assert (per_layer.param_bytes, per_layer.buffer_bytes) == (one.param_bytes, one.buffer_bytes)
    # beside them only the fp32 copies a step makes to compute an fp16 layer (fp32 and
    # int8 everywhere make none: ONNX Runtime fuses int8 steps into integer kernels)
    assert per_layer.memory_bytes - per_layer.workspace_bytes == one.memory_bytes - one.workspace_bytes
    assert (per_layer.workspace_bytes == 0) == (name != "fp16")


def test_conversions_at_precision_boundaries_are_workspace(app):
    """Each step's fp32 copies of what it reads below fp32 and of its output stored below
    fp32, none for an int8 layer reading int8 only; the plan's the largest step's."""
    mix = {"a": "int8", "b": "fp16", "s": "fp32", "c": "int8"}
    d = derive(app, whole_phases(app), layers=LayerPrecisions.of({"n": mix}))
    x, ab, c = 3 * 8 * 8 * 4, 4 * 8 * 8 * 4, 6 * 4 * 4 * 4      # fp32 bytes: input, a/b/s, c
    steps = {"a": x + ab,           # the input is stored at fp16 (b's, its widest reader)
             "b": x + ab, "s": ab + ab,     # s reads a (int8) and b (fp16), stores fp32
             "c": c}                         # reads s at fp32, stores int8
    assert d.workspace_bytes == max(steps.values()) == 2 * ab
    mix = {"a": "int8", "b": "int8", "s": "int8", "c": "int8"}
    assert derive(app, whole_phases(app), layers=LayerPrecisions.of({"n": mix})).workspace_bytes == 0


def test_plan_keeps_layer_precisions(app):
    mix = {"a": "int8", "b": "fp16", "s": "fp32", "c": "int8"}
    d = derive(app, whole_phases(app), layers=LayerPrecisions.of({"n": mix}))
    plan = plan_for(app, d, {"n": 1.0}, True)
    data = plan.to_dict()
    assert data["precision"] == "auto" and data["layer_precisions"] == {"n": mix}
    back = from_dict(data)
    assert back.layer_precisions == {"n": mix} and back.buffers == plan.buffers
    with pytest.raises(InputError, match="layer_precisions"):
        from_dict(data | {"layer_precisions": {"n": dict(mix, c="int4")}})


@pytest.mark.parametrize("doc, message", [
    ({"precision": "fp16", "min_sqnr_db": 20}, "a constraint of precision: auto"),
    ({"precision": "auto", "min_sqnr_db": "high"}, "expected a number of dB"),
    ({"precision": "auto-ish"}, "or auto"),
])
def test_app_keys_refused_in_one_line(tmp_path, doc, message):
    from conftest import write_tiny_onnx
    model = write_tiny_onnx(tmp_path / "t.onnx")
    with pytest.raises(InputError, match=message):
        memtrade.load_app({"name": "t", "cnns": [{"name": "c", "model": str(model)}]} | doc)


def test_auto_app_keys(app):
    assert app.precisions == LADDER and app.min_sqnr_db == 20.0 and app.precision.name == "fp32"


def test_fixed_precision_override_ends_auto_and_auto_refusals(app, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMTRADE_CACHE", str(tmp_path))
    fixed = memtrade.with_constraints(app, precision="int8")
    assert fixed.precisions == () and fixed.precision.name == "int8"
    assert memtrade.with_constraints(fixed, precision="auto").precisions == LADDER
    with pytest.raises(InputError, match="--tiling tiles: precision: auto"):
        memtrade.explore(app, tiling="tiles", _flag=lambda k: "--" + k)
    with pytest.raises(InputError, match="calibration"):       # frames are for auto only
        memtrade.explore(fixed, calibration="frames.npy")
    assert not list(tmp_path.iterdir())                        # refused before measuring

"""Chain steps (deploy/build/chains.py): consecutive whole int8 layers in one ONNX Runtime
call compute exactly what one step per layer computes, in the plan's arena bytes, in both
layouts; a chain reuses bytes its earlier members read (the plan's live bound) and the
manifest check judges lifetimes member by member; chains stop at their parameter bound. The
network: onnx_cases.joins_block, every layer whole, so one chain whose later members read
what earlier ones wrote two and three members before (the residual Add, the Concat)."""
from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pytest

from csdf.onnx_import import load_onnx
from deploy.build import chains
from deploy.build.derive import derive
from deploy.build.quantization import deployment_scales
from deploy.checks import manifest_check, reference
from deploy.ort.backend import OrtBackend
from deploy.runtime import manifest as mf
from deploy.runtime.executor import Executor
from deploy_fixtures import fired, make_plan, planned
from onnx_cases import joins_block
from sdf3.errors import InputError

H = 11


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    folder = tmp_path_factory.mktemp("chains")
    cnn = load_onnx(joins_block(folder / "joins.onnx", H), "net")
    return cnn, deployment_scales({"net": cnn}, None)


def _deploy(net, out, regions=True):
    cnn, scales = net
    shutil.rmtree(out, ignore_errors=True)
    plan = make_plan([cnn], {"net": {k: 1 for k in cnn.order()}}, data_bytes=1)
    return derive(plan, {"net": cnn}, out, scales=scales, regions=regions), plan


def _outputs(manifest, out, layout, frames):
    ex = Executor(manifest, out, OrtBackend(manifest.dtype, threads=1, layout=layout))
    got = [g[0].copy() for g in ex.run_stream("net", frames, True)]
    return got, ex.cnns["net"].calls // len(frames)


def test_a_chain_computes_what_one_step_per_layer_does(net, tmp_path):
    cnn = net[0]
    chained, plan = _deploy(net, tmp_path / "chained")
    single, _ = _deploy(net, tmp_path / "single", regions=False)
    steps = [s for _, _, s in chained.steps()]
    layers = [name for name in cnn.order() if name != "input"]
    assert [s.layer for s in steps] == ["input", "a"] and [l for l, _ in steps[1].region] == layers
    assert chained.models[steps[1].model].variant == "chain"
    assert fired(chained) == planned(plan) == fired(single)     # every firing once, in order
    assert chained.arena_bytes == single.arena_bytes == plan["buffer_bytes"]
    frames = [np.random.default_rng(s).standard_normal((1, 3, H, 9), dtype=np.float32) for s in range(3)]
    want, calls = _outputs(single, tmp_path / "single", "nchwc", frames)
    assert calls == len(layers) + 1
    sess = reference.session(tmp_path / "single" / single.cnns["net"].reference, 1)
    step = single.quantization.of("net", cnn.order()[-1]).scale
    for frame, got in zip(frames, want):     # the int8 reference, within ONNX Runtime's rounding
        assert np.abs(got - reference.run(sess, frame)[0].reshape(got.shape)).max() <= step * 1.001
    for layout in ("nchwc", "blocked"):
        got, calls = _outputs(chained, tmp_path / "chained", layout, frames)
        assert calls == 2
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_members_read_inside_the_call_and_ports_go_channels_last(net, tmp_path):
    """A tensor an earlier member wrote is read inside the call (a `chained` binding, no
    port), still written to its arena bytes; a port read inside the call is stored
    channels-last when its Transposes allow (deploy/ort/channels_last.py `_written`)."""
    manifest, _ = _deploy(net, tmp_path / "dep")
    step = [s for _, _, s in manifest.steps()][1]
    inside = [b for b in step.bind if b.kind == "chained"]
    stored = mf.stored_as(manifest.edges)
    written = {stored[b.edges[0]] for b in step.bind if b.writes}
    assert inside and all(stored[b.edges[0]] in written for b in inside)
    assert [b.layer for b in inside if stored[b.edges[0]] == stored["net.b->c"]] == ["c", "r"]
    backend = OrtBackend(manifest.dtype, threads=1, layout="blocked")
    Executor(manifest, tmp_path / "dep", backend)
    assert {stored[e] for e in backend.blocked_edges} & written


def test_the_check_judges_lifetimes_member_by_member(net, tmp_path):
    """The plan places a tensor over bytes of one that is dead by then, both inside one chain
    step; the check accepts that. b's output placed over a's output, which b reads inside
    the call (a `chained` binding, the only read of it), is refused."""
    manifest, _ = _deploy(net, tmp_path / "dep")
    manifest_check.check(manifest, tmp_path / "dep")
    step = [s for _, _, s in manifest.steps()][1]
    touched = [b.edges[0] for b in step.bind if b.kind in ("edge", "chained")]
    spans = {n: (manifest.edges[n].offset, manifest.edges[n].offset + manifest.edges[n].bytes)
             for n in touched}
    assert any(a != b and spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]
               for a in spans for b in spans), "no bytes reused inside the chain"
    a_out, b_out = manifest.edges["net.a->b"], manifest.edges["net.b->c"]
    assert a_out.bytes >= b_out.bytes
    moved = dataclasses.replace(b_out, buffer=a_out.buffer, offset=a_out.offset)
    broken = dataclasses.replace(manifest, edges={**manifest.edges, "net.b->c": moved})
    with pytest.raises(InputError, match="share arena bytes while both are live"):
        manifest_check.check(broken, tmp_path / "dep")


def test_chains_stop_at_their_parameter_bound(net, tmp_path, monkeypatch):
    cnn = net[0]
    monkeypatch.setattr(chains, "CHAIN_PARAMS", 700)
    manifest, plan = _deploy(net, tmp_path / "dep")
    steps = [s for _, _, s in manifest.steps()]
    assert len(steps) > 2 and fired(manifest) == planned(plan)
    for s in steps:
        members = [layer for layer, _ in s.region or [(s.layer, 0)]]
        if len(members) > 1:
            assert sum(cnn.layer(layer).param_count for layer in members) <= 700
    assert any(len(s.region or ()) > 1 for s in steps)
    frames = [np.random.default_rng(0).standard_normal((1, 3, H, 9), dtype=np.float32)]
    single, _ = _deploy(net, tmp_path / "single", regions=False)
    np.testing.assert_array_equal(_outputs(manifest, tmp_path / "dep", "blocked", frames)[0][0],
                                  _outputs(single, tmp_path / "single", "blocked", frames)[0][0])


def test_manifest_round_trip_keeps_members(net, tmp_path):
    manifest, _ = _deploy(net, tmp_path / "dep")
    data = json.loads((tmp_path / "dep" / "manifest.json").read_text())
    assert mf.Manifest.from_dict(data, "manifest") == manifest
    step = data["partitions"][0]["steps"][1]
    assert {b["layer"] for b in step["bind"]} == {layer for layer, _ in step["region"]}

"""int8 deployments on ONNX Runtime against the int8 reference (the whole network quantized
with the same scales, one session: deploy/checks/quantized.py), element by element: by parts
with padding rows at both borders, a stride-2 depthwise layer, a residual join, a
concatenation, parts of 3 rows of a height of 11 (the last part 2 rows); and damage (a
scale, a weight, two swapped steps, a ring read at the wrong slots) FAILs."""
from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from deploy.build.derive import derive
from deploy.build.quantization import deployment_scales
from deploy.checks import reference
from deploy.ort.backend import OrtBackend
from deploy.runtime import manifest as mf
from deploy.runtime.executor import Executor
from deploy_fixtures import make_plan
from onnx_cases import joins_block
from test_verdict import run_json, swap_models
from refusals import redigest, refused

H = 11


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    folder = tmp_path_factory.mktemp("int8")
    cnn = load_onnx(joins_block(folder / "joins.onnx", H), "net")
    return cnn, deployment_scales({"net": cnn}, None)


def _deploy(net, out, phases, regions=True):
    cnn, scales = net
    shutil.rmtree(out, ignore_errors=True)
    derive(make_plan([cnn], {"net": phases}, data_bytes=1), {"net": cnn}, out, scales=scales,
           regions=regions)
    return out


def _parts(cnn) -> dict[str, int]:
    """Every layer that can in parts of up to 3 rows (11 rows: 4 phases, the last of 2)."""
    return {k: (v if v == 1 else -(-int(cnn.layer(k).output_shape[2]) // 3)) for k, v in all_parts(cnn).items()}


@pytest.mark.parametrize("mode", ["whole", "parts", "regions"])
def test_int8_outputs_equal_the_quantized_reference(net, tmp_path, mode):
    """Layout "nchwc" (every tensor as the manifest lays it out) against the reference; layout
    "blocked" (tensors channels-last where both ends allow, deploy/ort/channels_last.py)
    computes the same bytes: its outputs equal the first's element by element."""
    cnn = net[0]
    phases = {k: 1 for k in cnn.order()} if mode == "whole" else _parts(cnn)
    out = _deploy(net, tmp_path / mode, phases, regions=mode == "regions")
    manifest = mf.load(out)
    assert manifest.dtype == "uint8" and manifest.arena_bytes == make_plan(
        [cnn], {"net": phases}, data_bytes=1)["buffer_bytes"]
    if mode != "whole":
        assert any(s.bind and any(b.kind == "const" and b.name.endswith("_mask") for b in s.bind)
                   for _, _, s in manifest.steps()), "no part reads padding rows"
    ex = Executor(manifest, out, OrtBackend(manifest.dtype, threads=1))
    sess = reference.session(out / manifest.cnns["net"].reference, 1)
    step = manifest.quantization.of("net", cnn.order()[-1]).scale
    frames = [np.random.default_rng(s).standard_normal((1, 3, H, 9), dtype=np.float32) for s in range(3)]
    plain = [got[0].copy() for got in ex.run_stream("net", frames, True)]
    for frame, got in zip(frames, plain):
        want = reference.run(sess, frame)[0]
        units = np.abs(got - want.reshape(got.shape)) / step
        assert units.max() <= 1.0 + 1e-3, units.max()       # ONNX Runtime's fused int8 kernels
        assert np.mean(units > 0.5) <= 0.05                  # nearly every element exact
    backend = OrtBackend(manifest.dtype, threads=1, layout="blocked")
    last = Executor(manifest, out, backend)
    layouts = {manifest.edges[e].layout for e in backend.blocked_edges}
    assert layouts == {"nchw"} if mode == "whole" else "hncw" in layouts, layouts
    for want, got in zip(plain, last.run_stream("net", frames, True)):
        np.testing.assert_array_equal(got[0], want)


def test_damage_fails_at_int8(net, tmp_path, capsys):
    out = _deploy(net, tmp_path / "dep", _parts(net[0]))
    code, res = run_json(capsys, out)
    v = res["verdict"]["net"]
    assert code == 0 and v["verdict"] == "PASS", v
    assert v["tolerance"] == pytest.approx(6 * net[1].of("net", net[0].order()[-1]).scale)
    pristine = tmp_path / "pristine"
    shutil.copytree(out, pristine)

    # a wrong scale: the stored scale of layer c's output doubled in the step that writes it
    # (its digest re-recorded): the model and the manifest's entry disagree, refused at load
    # (deploy/checks/quant_entries.py)
    rel = next(r for r, m in json.loads((out / "manifest.json").read_text())["models"].items()
               if m["layer"] == "c")
    model = onnx.load(str(out / rel))
    for i, t in enumerate(model.graph.initializer):
        if t.name == "scale:c":
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * 2, t.name))
    onnx.save(model, str(out / rel))
    redigest(out)
    refused(capsys, ["run", str(out), "--frames", "2", "--in-process"],
            "key 'quantization.tensors.net/c'", rel)

    # a wrong weight: the int8 weights of output channel 0 of layer a's first step model
    # moved by 20 steps of their scale
    shutil.rmtree(out)
    shutil.copytree(pristine, out)
    rel = next(r for r, m in json.loads((out / "manifest.json").read_text())["models"].items()
               if m["layer"] == "a")
    model = onnx.load(str(out / rel))
    for i, t in enumerate(model.graph.initializer):
        w = numpy_helper.to_array(t)
        if w.dtype == np.int8 and w.ndim == 4:
            w = w.copy()
            w[0] = np.clip(w[0].astype(np.int32) + 20, -127, 127).astype(np.int8)
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(w, t.name))
            break
    else:
        raise AssertionError(f"no int8 weight in {rel}")
    onnx.save(model, str(out / rel))
    redigest(out)
    assert run_json(capsys, out)[1]["verdict"]["net"]["verdict"] == "FAIL"

    # two step models of equal ports swapped (the 1x1 convs c and c2)
    shutil.rmtree(out)
    shutil.copytree(pristine, out)
    swap_models(out, "c", "c2")
    code, res = run_json(capsys, out)
    assert code == 4 and res["verdict"]["net"]["verdict"] == "FAIL"

    # a ring read one slot off: an interior part of b gathers every row of its window one
    # slot further on (slot indices still inside the ring, so the manifest check lets it run)
    shutil.rmtree(out)
    shutil.copytree(pristine, out)
    path = out / "manifest.json"
    manifest = json.loads(path.read_text())
    step = next(s for p in manifest["partitions"] for s in p["steps"]
                if s["layer"] == "b" and s["phase"] == 1)
    ring = next(b for b in step["bind"] if b["kind"] == "edge" and b["name"] == "in0")
    slots = manifest["edges"][ring["edges"][0]]["slots"]
    idx = next(b for b in step["bind"] if b["kind"] == "const" and b["name"] == "in0_idx")
    idx["values"] = [(v + 1) % slots for v in idx["values"]]
    path.write_text(json.dumps(manifest))
    code, res = run_json(capsys, out)
    assert code == 4 and res["verdict"]["net"]["verdict"] == "FAIL"


def test_prepacking_sessions_are_built_first_largest_first(net, tmp_path):
    """A pre-packing session holds its weights up to three times while ONNX Runtime builds
    it; built before every other session, the largest first, that transient never stands on
    the rest of the deployment (OrtBackend._prepacked_first)."""
    cnn = net[0]
    out = _deploy(net, tmp_path / "parts", _parts(cnn))
    manifest = mf.load(out)
    backend = OrtBackend(manifest.dtype, threads=1, layout="blocked")
    built = []
    backend.on_session = lambda skey, model, arrays: built.append(skey.split(":", 1)[1])
    Executor(manifest, out, backend)
    prepacked = backend.prepacked
    assert prepacked and set(built[:len(prepacked)]) == prepacked

    def weight_bytes(key):     # the model's integer tensors (weights, biases), read here
        return sum(numpy_helper.to_array(t).nbytes for t in onnx.load(key).graph.initializer
                   if t.data_type in (onnx.TensorProto.INT8, onnx.TensorProto.INT32)
                   and len(t.dims) >= 1 and numpy_helper.to_array(t).size > 1)
    sizes = [weight_bytes(key) for key in built[:len(prepacked)]]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1], sizes

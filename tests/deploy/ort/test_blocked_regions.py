"""Region steps on row-blocked rings (deploy/ort/blocked_regions.py): the rewritten graph of
every band model computes exactly what ONNX Runtime's own optimised graph computes on the
same rows, with its ReorderInput / ReorderOutput pairs gone, and a deployment run in the
blocked layout matches ONNX Runtime on the original model."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from deploy.build.derive import derive as deploy
from deploy.ort import blocked as ob
from deploy.ort import blocked_regions as br
from deploy.ort.backend import OrtBackend
from deploy.run.measure import measure
from deploy.run.verdict import RTOL
from onnx_cases import region_block
from deploy_fixtures import make_plan

NAME = "rb16"


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    """The region test net with 16 channels: whole NCHWc blocks with AVX2 (8) or AVX-512 (16)."""
    return load_onnx(str(region_block(tmp_path_factory.mktemp("rb16") / "rb.onnx", c=16)), name=NAME)


def _blocked(x: np.ndarray, b: int) -> np.ndarray:
    """Ring rows [S, N, C, W] -> row-blocked [S, N, C/b, W, b]."""
    s, n, c, w = x.shape
    return np.ascontiguousarray(x.reshape(s, n, c // b, b, w).transpose(0, 1, 2, 4, 3))


def _plain(x: np.ndarray) -> np.ndarray:
    s, n, cb, w, b = x.shape
    return x.transpose(0, 1, 2, 4, 3).reshape(s, n, cb * b, w)


def _session(model) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _reorders(model) -> int:
    return sum(1 for n in model.graph.node if n.op_type in ("ReorderInput", "ReorderOutput"))


def test_every_band_model_blocked_computes_its_plain_form(cnn, tmp_path):
    plan = make_plan([cnn], {NAME: all_parts(cnn)})
    manifest = deploy(plan, {NAME: cnn}, tmp_path / "dep", regions=True, every_band=True)
    block = ob.block_size(ort.SessionOptions())
    rels = sorted({s.model for p in manifest.partitions for s in p.steps if s.region})
    assert rels
    rng = np.random.default_rng(0)
    rewritten = 0
    for rel in rels:
        opt = ob.optimized(tmp_path / "dep" / rel, tmp_path, ort.SessionOptions())
        isles = [i for i in br.islands(opt, block) if not i.why]
        ports = frozenset(p for i in isles for p in i.ports)
        new = br.rewrite(opt, ports, block)
        # each island's ReorderOutput and ReorderInput became views
        gone = sum(1 for i in isles for n in i.nodes if n.op_type.startswith("Reorder"))
        assert _reorders(new) == _reorders(opt) - gone
        rewritten += gone
        plain, fast = _session(opt), _session(new)
        feed, feed_b = {}, {}
        for v in plain.get_inputs():
            if "int32" in v.type:          # slot indices: any slots of the ring
                ring = plain.get_inputs()[[i.name for i in plain.get_inputs()].index(v.name[:-4])]
                feed[v.name] = feed_b[v.name] = rng.integers(0, ring.shape[0], v.shape).astype(np.int32)
                continue
            x = rng.standard_normal(v.shape).astype(np.float32)
            feed[v.name], feed_b[v.name] = x, (_blocked(x, block) if v.name in ports else x)
        want = plain.run(None, feed)
        got = fast.run(None, feed_b)
        for o, w, g in zip(plain.get_outputs(), want, got):
            np.testing.assert_array_equal(_plain(g) if o.name in ports else g, w, err_msg=f"{rel} {o.name}")
    assert rewritten > 0


@pytest.mark.parametrize("data_bytes", [4, 2], ids=["fp32", "fp16"])
def test_a_blocked_region_deployment_computes_what_onnx_runtime_computes(cnn, tmp_path, data_bytes):
    plan = make_plan([cnn], {NAME: all_parts(cnn)}, data_bytes=data_bytes)
    manifest = deploy(plan, {NAME: cnn}, tmp_path / "dep", regions=True, every_band=True)
    result = measure(tmp_path / "dep", frames=2, layout="blocked", threads=1)
    tol = 1e-4 if data_bytes == 4 else RTOL["float16"] * result["max_abs_output"][NAME]
    assert result["max_abs_diff"][NAME] <= tol
    assert result["arena_bytes"] == plan["buffer_bytes"]
    # the rings region steps gather are stored row-blocked (16 channels: whole blocks)
    be = OrtBackend(manifest.dtype, 1, layout="blocked", optimize_in_child=False)
    be.prepare(manifest, tmp_path / "dep")
    gathered = {b.edges[0] for p in manifest.partitions for s in p.steps if s.region
                for b in s.bind if b.kind == "edge" and not b.name.startswith("out")
                and manifest.edges[b.edges[0]].shape[1] == 16}
    assert gathered & be.blocked_edges

"""What step models hold, measured in the form the deployment runs them
(deploy/profile/deployed_forms.py, deploy/profile/bands.py).

- The kept form of every probed step is the session the deployment built: run in a fresh
  session (no optimisation, weights handed in, as the probe runs it) on the step's own arena
  arrays it writes exactly what the deployment's call wrote there; blocked ports keep their
  5-D shapes and lose their reorders.
- Each distinct region or part model is probed once; a region model's session state is
  shared among its layers by their firings in it, a part model's is its layer's, the
  workspace is the largest for each layer (the probe's figures stood in, sums checked
  exactly from the manifest); a whole layer beside layers by parts is probed too, and in a
  deployment of whole layers every step is."""
from __future__ import annotations

import gc
from collections import Counter
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from deploy.build.derive import derive as deploy
from deploy.ort.backend import OrtBackend
from deploy.profile import bands, workspace_probe
from deploy.profile.deployed_forms import FormKeeper, deployed_jobs
from deploy.runtime.executor import Executor
from deploy.runtime.footprint import heap_in_use
from onnx_cases import region_block
from deploy_fixtures import make_plan


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return load_onnx(str(region_block(tmp_path_factory.mktemp("rb") / "rb.onnx", c=16)), name="rb")


def _whole_conv(cnn) -> str:
    return next(n for n in cnn.order() if n in all_parts(cnn) and cnn.layer(n).op == "Conv"
                and n != cnn.order()[1])                       # a conv inside, kept whole


def _probed_steps(manifest):
    edges = manifest.edges
    return [s for p in manifest.partitions for s in p.steps if s.region or
            s.model and (manifest.models[s.model].variant.startswith("part") or any(
                b.kind == "edge" and edges[b.edges[0]].layout == "hncw" for b in s.bind))]


def _loaded(manifest, folder: Path, keep: Path):
    backend = OrtBackend("float32", 1, layout="blocked", optimize_in_child=False)
    backend.on_session = keeper = FormKeeper(keep)
    executor = Executor(manifest, folder, backend)
    return backend, keeper, executor


def _run_kept(job: workspace_probe.ProbeJob, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The kept form run as the probe runs it: weights handed in, no optimisation."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    source, values = workspace_probe.handed_in(job.model, opts)
    sess = ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def test_kept_forms_compute_what_the_deployment_computes(cnn, tmp_path):
    phases = all_parts(cnn) | {_whole_conv(cnn): 1}
    manifest = deploy(make_plan([cnn], {"rb": phases}), {"rb": cnn}, tmp_path / "dep", regions=True,
                      every_band=True)
    backend, keeper, ex = _loaded(manifest, tmp_path / "dep", tmp_path / "forms")
    assert backend.blocked_edges, "the 16-channel net stores some tensors blocked"
    jobs = deployed_jobs(backend, keeper, manifest, tmp_path / "dep", whole=False)
    steps = _probed_steps(manifest)
    assert len(jobs) == len({s.model for s in steps})
    pname, calls = manifest.partitions[0].name, ex.cnns["rb"].partitions[0].calls[0]
    first = {}
    for i, s in enumerate(manifest.partitions[0].steps):
        first.setdefault(s.model, i)
    kept = {str(keeper.paths[backend.session_key(tmp_path / "dep" / s.model)]): s for s in steps}
    rng = np.random.default_rng(0)
    blocked_ports = 0
    for shares, job in jobs:
        step = kept[job.model]
        assert job.mode == "deployed" and sum(shares.values()) == pytest.approx(1.0)
        assert set(job.inputs) | set(job.outputs) == {b.name for b in step.bind}
        specs = list(job.inputs.values()) + list(job.outputs.values())
        blocked_ports += sum(len(spec.shape) == 5 for spec in specs)
        # the deployment's call on random arena contents, then the kept form on copies of
        # what the call read: the same outputs
        i = first[step.model]
        ex.arena[...] = rng.integers(0, 255, ex.arena.shape, dtype=np.uint8) & 0x3f   # finite floats
        ins, outs = ex.views[(pname, i, 0)]
        feeds = {n: np.ascontiguousarray(a).reshape(job.inputs[n].shape) for n, a in ins.items()}
        calls[i]()
        got = _run_kept(job, feeds)
        for n, arr in outs.items():
            np.testing.assert_array_equal(got[n].reshape(arr.shape), arr)
    assert blocked_ports > 0, "some probed port is bound in its blocked (5-D) form"


@pytest.mark.parametrize("regions", [True, False], ids=["region-steps", "part-steps"])
def test_model_state_is_shared_by_firings_and_counted_once_per_model(cnn, tmp_path, monkeypatch,
                                                                     regions):
    whole = _whole_conv(cnn)
    phases = all_parts(cnn) | {whole: 1}
    manifest = deploy(make_plan([cnn], {"rb": phases}), {"rb": cnn}, tmp_path / "dep",
                      regions=regions, every_band=True)
    steps = _probed_steps(manifest)
    assert any(s.layer == whole and not s.region for s in steps)
    assert any(bool(s.region) for s in steps) == regions
    models = list(dict.fromkeys(s.model for s in steps))
    assert len(models) < len(steps)            # steady bands share a model: probed once
    backend, keeper, _ = _loaded(manifest, tmp_path / "dep", tmp_path / "forms")
    jobs = deployed_jobs(backend, keeper, manifest, tmp_path / "dep", whole=False)
    by_path = {str(keeper.paths[backend.session_key(tmp_path / "dep" / m)]): m for m in models}
    assert sorted(by_path[j.model] for _, j in jobs) == sorted(models)
    figures = {m: (100 * (k + 1), 1000 * (k + 1)) for k, m in enumerate(models)}  # (ws, state)
    probed = []

    def fake(jobs, sessions=False):
        probed.extend(jobs)
        return [figures[by_path[job.model]] for job in jobs]

    monkeypatch.setattr(workspace_probe, "measure", fake)
    monkeypatch.setattr(workspace_probe, "available", lambda: True)
    got = bands.band_bytes(jobs)
    assert len(probed) == len(models)
    want_state, want_ws = {}, {}
    for m in models:
        first = next(s for s in steps if s.model == m)
        count = Counter(layer for layer, _ in first.region or [[first.layer, 0]])
        for layer, n in count.items():
            want_state[layer] = want_state.get(layer, 0) + figures[m][1] * n / sum(count.values())
            want_ws[layer] = max(want_ws.get(layer, 0), figures[m][0])
    assert got == {layer: (round(want_state[layer]), want_ws[layer]) for layer in want_state}


def test_a_whole_deployment_probes_every_step(cnn, tmp_path):
    manifest = deploy(make_plan([cnn], {"rb": {n: 1 for n in cnn.order()}}), {"rb": cnn},
                      tmp_path / "dep", regions=True, every_band=True)
    backend, keeper, _ = _loaded(manifest, tmp_path / "dep", tmp_path / "forms")
    jobs = deployed_jobs(backend, keeper, manifest, tmp_path / "dep", whole=True)
    with_model = {s.model for p in manifest.partitions for s in p.steps if s.model}
    assert len(jobs) == len(with_model)
    assert {layer for shares, _ in jobs for layer in shares} == {
        s.layer for p in manifest.partitions for s in p.steps if s.model}
    assert deployed_jobs(backend, keeper, manifest, tmp_path / "dep", whole=False) == []


def test_the_state_counted_is_what_the_deployment_held(cnn, tmp_path, monkeypatch):
    """With the ladder's count on (OrtBackend.session_heap), each job carries the heap its
    session kept while the deployment loaded, and band_bytes takes it over the probe's.
    What loading kept is then all counted: the sessions' state, the weights, the arena and
    the bindings sum to the heap the load grew by, within 32 KiB (the executor's own views
    and slot vectors, ~11 KiB here); the sessions hold ~2.5 MB of it."""
    if heap_in_use() is None:
        pytest.skip("glibc's mallinfo2 is needed to count heap bytes")
    manifest = deploy(make_plan([cnn], {"rb": all_parts(cnn)}), {"rb": cnn}, tmp_path / "dep",
                      regions=True, every_band=True)
    backend = OrtBackend("float32", 1, layout="blocked", optimize_in_child=True)
    backend.on_session = keeper = FormKeeper(tmp_path / "forms")
    backend.session_heap, backend.bind_heap = {}, [0, 0]
    backend.prepare(manifest, tmp_path / "dep")   # ONNX Runtime's one-time set-up (~10 MB):
    gc.collect()                                  # before the count, as in the ladder's child;
    gc.disable()                                  # no earlier test's garbage freed during it
    try:
        before = heap_in_use()
        executor = Executor(manifest, tmp_path / "dep", backend)
        grown = heap_in_use() - before
    finally:
        gc.enable()
    counted = (sum(backend.session_heap.values()) + backend.param_bytes()
               + executor.arena.nbytes + backend.bind_heap[0])
    assert abs(grown - counted) <= 32 << 10, (grown, counted)
    assert sum(backend.session_heap.values()) > grown // 2
    jobs = deployed_jobs(backend, keeper, manifest, tmp_path / "dep", whole=False)
    assert jobs and all(job.held == backend.session_heap[backend.session_key(
        tmp_path / "dep" / next(s.model for s in _probed_steps(manifest)
                                if str(keeper.paths[backend.session_key(tmp_path / "dep" / s.model)])
                                == job.model))] for _, job in jobs)
    monkeypatch.setattr(workspace_probe, "measure", lambda js, sessions=False: [(7, 0) for _ in js])
    monkeypatch.setattr(workspace_probe, "available", lambda: True)
    want: dict[str, float] = {}
    for shares, job in jobs:
        for layer, share in shares.items():
            want[layer] = want.get(layer, 0.0) + share * job.held
    assert bands.band_bytes(jobs) == {layer: (round(v), 7) for layer, v in want.items()}

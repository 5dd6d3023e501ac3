"""What by-parts step models hold, per layer (deploy/profile/bands.py): each distinct region
or part model is probed once, a region model's session state shared among its layers by
their firings in it, a part model's its layer's, the workspace the largest for each layer. The probe's figures are stood in for here
(each model's own numbers), so the sums are checked exactly, from the manifest."""
from __future__ import annotations

from collections import Counter

import pytest

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from deploy.build.derive import derive as deploy
from deploy.profile import bands, workspace_probe
from onnx_cases import region_block
from test_deploy_fixtures import make_plan


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return load_onnx(str(region_block(tmp_path_factory.mktemp("rb") / "rb.onnx")), name="rb")


@pytest.mark.parametrize("regions", [True, False], ids=["region-steps", "part-steps"])
def test_model_state_is_shared_by_firings_and_counted_once_per_model(cnn, tmp_path, monkeypatch,
                                                                     regions):
    manifest = deploy(make_plan([cnn], {"rb": all_parts(cnn)}), {"rb": cnn}, tmp_path / "dep",
                      regions=regions)
    steps = [s for p in manifest["partitions"] for s in p["steps"] if s.get("region") or
             s["model"] and manifest["models"][s["model"]]["variant"].startswith("part")]
    assert steps and all(bool(s.get("region")) == regions for s in steps)
    models = list(dict.fromkeys(s["model"] for s in steps))
    assert len(models) < len(steps)            # steady bands share a model: probed once
    figures = {m: (100 * (k + 1), 1000 * (k + 1)) for k, m in enumerate(models)}  # (ws, state)
    probed = []

    def fake(jobs, sessions=False):
        probed.extend(jobs)
        return [figures[next(m for m in models if job["model"].endswith(m))] for job in jobs]

    monkeypatch.setattr(workspace_probe, "measure", fake)
    monkeypatch.setattr(workspace_probe, "available", lambda: True)
    got = bands.band_bytes(tmp_path / "dep", manifest)
    assert len(probed) == len(models)
    want_state, want_ws = {}, {}
    for m in models:
        first = next(s for s in steps if s["model"] == m)
        count = Counter(layer for layer, _ in first.get("region") or [[first["layer"], 0]])
        for layer, n in count.items():
            want_state[layer] = want_state.get(layer, 0) + figures[m][1] * n / sum(count.values())
            want_ws[layer] = max(want_ws.get(layer, 0), figures[m][0])
    assert got == {layer: (round(want_state[layer]), want_ws[layer]) for layer in want_state}
    # each job binds the model's ports as its first step does (slot indices by value)
    job = probed[0]
    first = next(s for s in steps if s["model"] == models[0])
    assert set(job["inputs"]) | set(job["outputs"]) == {b["name"] for b in first["bind"]}

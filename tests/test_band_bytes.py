"""What by-parts step models hold, per layer (deploy/profile/bands.py): each distinct region
or part model is probed once, a region model's session state shared among its layers by
their firings in it, a part model's its layer's, the workspace the largest for each layer. The probe's figures are stood in for here
(each model's own numbers), so the sums are checked exactly, from the manifest; a whole
layer's model beside layers by parts (reading or writing a rows ring) is probed too."""
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
    whole = next(n for n in cnn.order() if n in all_parts(cnn) and cnn.layer(n).op == "Conv"
                 and n != cnn.order()[1])                       # a conv inside, kept whole
    phases = all_parts(cnn) | {whole: 1}
    manifest = deploy(make_plan([cnn], {"rb": phases}), {"rb": cnn}, tmp_path / "dep",
                      regions=regions)
    edges = manifest["edges"]
    # probed: region and part steps, and whole steps binding a rows ring (beside parts)
    steps = [s for p in manifest["partitions"] for s in p["steps"] if s.get("region") or
             s["model"] and (manifest["models"][s["model"]]["variant"].startswith("part") or any(
                 b["kind"] == "edge" and edges[b["edges"][0]]["layout"] == "hncw" for b in s["bind"]))]
    assert any(s["layer"] == whole and not s.get("region") for s in steps)
    assert any(bool(s.get("region")) for s in steps) == regions
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

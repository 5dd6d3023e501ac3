"""What the step models of a deployment hold: each distinct step model,
in the form the deployment runs it (deploy/profile/deployed_forms.py), measured by the
workspace probe (deploy/profile/workspace_probe.py: the workspace one call needs, and its
session state beyond its weights) and, where the ladder's deployment counted it
(OrtBackend.session_heap), its state as the heap its session kept there, then given to the
layers it computes. Why the deployment's own count: the probe builds each session alone,
without the deployment's shared arena and thread pool, and MobileNetV2's reuse-only
deployment held 36 KiB per whole-layer session where the probe measured 29 (2.34 against
1.86 MiB over its 66 models; tests/deploy/runtime/test_band_bytes.py checks that the sessions' counts,
weights, arena and bindings add up to what loading kept).

Why: a layer by parts beside another by parts runs inside band models, not its own part
model, and a band model's session holds ONNX Runtime's state for every node of every firing
it computes (~2.6 KiB a node measured here, against ~20-35 KiB for a one-node session):
YOLOv2-16's least-memory plan loaded 28 band models holding 4.6 MiB of state where its
layers' part models measured 1.5 MiB. A part model's workspace grows with its part (the
per-layer probe, deploy/profile/layers.py, runs one-row parts). And a whole layer's step in
the blocked layout reads and writes NCHWc arena views with no reorder: MobileNetV2's
reuse-only plan counted 5.6 MiB of workspace from the per-layer probe, which runs it
between ONNX Runtime's reorders, and held 0.2. `explore profile` measures the steps of its
ladder's deployments (deploy/profile/ladder.py): every step of the whole deployment
(LayerBytes.whole_session_bytes, whole_ws_bytes) and, with `--steps regions`, the by-parts
steps of the others, per layer and Φ: every layer by parts (band_session_bytes,
band_ws_bytes), each layer by parts with its neighbours whole (alone_*), and whole layers
beside parts (beside_*); explorer/throughput/runtime_costs.py counts the context a plan puts the
layer in.

A region model's state is shared among its layers by their firings in it; a part model's
is its layer's; each distinct model counts once however many steps run it (the bands of a
steady state share one model, a layer's phases one part model); a layer's workspace is the
largest of the models computing it.
"""
from __future__ import annotations

from deploy.profile import workspace_probe
from deploy.profile.workspace_probe import ProbeJob


def band_bytes(jobs: list[tuple[dict[str, float], ProbeJob]]) -> dict[str, tuple[int, int]]:
    """{layer: (its shares of the step models' session state, the largest workspace of
    those models)} from probe jobs ({layer: share}, job) of a deployment's step models as
    it runs them (deploy/profile/deployed_forms.py); {} where the probe cannot run (not
    Linux) or nothing was probed. A job's state is what its session held in the
    deployment ("held") where the ladder counted it, else the probe's."""
    if not jobs or not workspace_probe.available():
        return {}
    measured = workspace_probe.measure([job for _, job in jobs], sessions=True)
    state: dict[str, float] = {}
    ws: dict[str, int] = {}
    for (shares, job), (workspace, session) in zip(jobs, measured):
        session = job.held if job.held is not None else session
        for layer, share in shares.items():
            state[layer] = state.get(layer, 0.0) + share * session
            ws[layer] = max(ws.get(layer, 0), int(workspace))
    return {layer: (int(round(state[layer])), ws[layer]) for layer in state}

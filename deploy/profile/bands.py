"""What the by-parts step models of a deployment hold (issue 27, item 1): each distinct
region model (deploy/steps/regions.py) and part model measured by the workspace probe
(deploy/profile/workspace_probe.py: its session state beyond its weights, and the workspace
one call needs), then given to the layers it computes.

Why: a layer by parts beside another by parts runs inside band models, not its own part
model, and a band model's session holds ONNX Runtime's state for every node of every firing
it computes (~2.6 KiB a node measured here, against ~20 KiB for a one-node session): YOLOv2-16's
least-memory plan loaded 28 band models holding 4.6 MiB of state where its layers' part
models measured 1.5 MiB. And a part model's workspace grows with its part: the profile's
per-layer probe (deploy/profile/layers.py) runs one-row parts, and MobileNetV2's features_2_dw
in 2 parts of 28 rows (its window gathered, transposed and reordered: 2.4 MB each) held 7.3
MiB of workspace where the plan counted 3.5. `explore profile --steps regions` measures the
by-parts steps of its ladder's deployments (deploy/profile/ladder.py) and files them per
layer and Φ, every layer by parts (LayerTimes.band_session_bytes, band_ws_bytes) and each
layer by parts with its neighbours whole (alone_session_bytes, alone_ws_bytes);
explorer/memory/buffers.py counts the context a plan puts the layer in.

A region model's state is shared among its layers by their firings in it; a part model's
is its layer's; each distinct model counts once however many steps run it (the bands of a
steady state share one model, a layer's phases one part model); a layer's workspace is the
largest of the models computing it.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from deploy.profile import workspace_probe


def band_jobs(deploy_dir: Path, manifest: dict, threads: int = 1) -> list[tuple[dict[str, float], dict]]:
    """Per distinct region or part model: ({layer: its share of the model's firings}, probe
    job bound like the first step that runs it)."""
    dtype = np.dtype(manifest["dtype"])
    seen, out = set(), []
    for part in manifest["partitions"]:
        for step in part["steps"]:
            if not _probed(step, manifest) or step["model"] in seen:
                continue
            seen.add(step["model"])
            feeds, fetches = {}, {}
            for b in step["bind"]:
                if b["kind"] == "const":
                    feeds[b["name"]] = np.asarray(b["values"], np.int32)
                elif b["name"].startswith(("out", "sink")):
                    fetches[b["name"]] = np.zeros(b["shape"], dtype)
                else:
                    feeds[b["name"]] = np.zeros(b["shape"], dtype)
            firings = Counter(layer for layer, _ in step.get("region") or [[step["layer"], 0]])
            total = sum(firings.values())
            shares = {layer: n / total for layer, n in firings.items()}
            out.append((shares, workspace_probe.job(Path(deploy_dir) / step["model"], "nchwc",
                                                    feeds, fetches, threads)))
    return out


def _probed(step: dict, manifest: dict) -> bool:
    """A step whose models a plan's context changes: a region or part step, or a whole
    layer's step reading or writing a rows ring (beside a layer by parts)."""
    if step.get("region"):
        return True
    if not step["model"]:
        return False
    if str(manifest["models"].get(step["model"], {}).get("variant", "")).startswith("part"):
        return True
    edges = manifest["edges"]
    return any(b["kind"] == "edge" and edges[b["edges"][0]]["layout"] == "hncw" for b in step["bind"])


def band_bytes(deploy_dir: Path, manifest: dict, threads: int = 1) -> dict[str, tuple[int, int]]:
    """{layer: (its shares of the step models' session state, the largest workspace of
    those models)} over the region and part models of a deployment and the whole layers'
    models beside them; {} where the probe cannot run (not Linux) or nothing runs by parts."""
    jobs = band_jobs(deploy_dir, manifest, threads)
    if not jobs or not workspace_probe.available():
        return {}
    measured = workspace_probe.measure([job for _, job in jobs], sessions=True)
    state: dict[str, float] = {}
    ws: dict[str, int] = {}
    for (shares, _), (workspace, session) in zip(jobs, measured):
        for layer, share in shares.items():
            state[layer] = state.get(layer, 0.0) + share * session
            ws[layer] = max(ws.get(layer, 0), int(workspace))
    return {layer: (int(round(state[layer])), ws[layer]) for layer in state}

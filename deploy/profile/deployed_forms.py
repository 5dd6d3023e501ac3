"""Step models in the form a deployment runs them, kept for the workspace probe, so
that each step is measured as the deployment runs it (docs/region_steps.md).

Why: the per-layer probe (deploy/profile/layers.py) runs a whole layer's model as ONNX
Runtime optimises it alone, between a ReorderInput and a ReorderOutput; in a deployment
with layout "blocked" the same step reads and writes NCHWc arena views directly
(deploy/ort/blocked.py) and a band model runs its row-blocked rewrite
(deploy/ort/blocked_regions.py). Measured on MobileNetV2's reuse-only plan: 5.6 MiB of
workspace and 4.6 MiB of session state planned from the per-layer probe, 0.2 and 3.1 MiB
held by the process. So the ladder's timing child (deploy/profile/ladder.py) keeps every
session's final graph with its weights (`FormKeeper`, the backend's `on_session` hook) and
names, per step model, the job that binds it as the step does (`deployed_jobs`); the
parent measures those jobs in the probe's child (deploy/profile/workspace_probe.py, mode
"deployed": no further optimisation, no pre-packing, as OrtBackend loads them).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from deploy.profile.workspace_probe import PortSpec, ProbeJob
from deploy.runtime.manifest_records import Manifest, Step


class FormKeeper:
    """OrtBackend.on_session hook: each session's graph and weights saved as one standalone
    model in `folder` (weights in a side file), its ports' declared shapes remembered."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.paths: dict[str, Path] = {}
        self.ports: dict[str, dict[str, list | None]] = {}

    def __call__(self, skey: str, model: onnx.ModelProto, arrays: dict[str, np.ndarray]) -> None:
        kept = onnx.ModelProto()
        kept.CopyFrom(model)
        inline = [t for t in kept.graph.initializer if t.name not in arrays]   # the rest: references
        del kept.graph.initializer[:]
        kept.graph.initializer.extend(inline)
        kept.graph.initializer.extend(numpy_helper.from_array(np.ascontiguousarray(a), name)
                                      for name, a in arrays.items())
        path = self.folder / f"{len(self.paths)}.onnx"
        onnx.save(kept, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                  location=f"{path.stem}.bin", size_threshold=1024)
        self.paths[skey] = path
        self.ports[skey] = {v.name: _dims(v) for v in list(kept.graph.input) + list(kept.graph.output)}


def _dims(value: onnx.ValueInfoProto) -> list | None:
    dims = value.type.tensor_type.shape.dim
    out = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    return out if out and all(isinstance(d, int) and d > 0 for d in out) else None


def probed(step: Step, manifest: Manifest, whole: bool) -> bool:
    """The steps whose models a run measures: every step with a model in a deployment of
    whole layers (`whole`); otherwise those a plan's by-parts context changes: a region or
    part step, or a whole layer's step reading or writing a rows ring (beside parts)."""
    if not step.model:
        return False
    if whole or step.region:
        return True
    model = manifest.models.get(step.model)
    if model is not None and model.variant.startswith("part"):
        return True
    return any(b.kind == "edge" and manifest.edges[b.edges[0]].layout == "hncw" for b in step.bind)


def shares(step: Step) -> dict[str, float]:
    """The layers a step model's session state belongs to: its layer, or a region model's
    layers by their firings in it."""
    firings = Counter(layer for layer, _ in step.region or [(step.layer, 0)])
    total = sum(firings.values())
    return {layer: n / total for layer, n in firings.items()}


def deployed_jobs(backend, keeper: FormKeeper, manifest: Manifest, root: Path, whole: bool,
                  threads: int = 1) -> list[tuple[dict[str, float], ProbeJob]]:
    """Per distinct step model probed (`probed`), once the deployment is loaded: ({layer:
    share}, probe job of its kept form bound as its first step binds it: blocked ports in
    their declared 5-D shapes, row slots and masks by value; with "held", the heap its
    session kept in the deployment, where the backend counted it: `session_heap`)."""
    seen, out = set(), []
    dtype = str(np.dtype(manifest.dtype))
    for _, _, step in manifest.steps():
        if not probed(step, manifest, whole) or step.model in seen:
            continue
        seen.add(step.model)
        skey = backend.session_key(Path(root) / step.model)
        if skey not in keeper.paths:       # never built (a tuned-away layout)
            continue
        declared = keeper.ports[skey]
        inputs: dict[str, PortSpec] = {}
        outputs: dict[str, PortSpec] = {}
        for b in step.bind:
            side = outputs if b.name.startswith(("out", "sink")) else inputs
            if b.kind == "const":
                side[b.name] = PortSpec((len(b.values),), "int32", tuple(b.values))
                continue
            shape, dims = [int(d) for d in b.shape], declared.get(b.name)
            if dims and int(np.prod(dims)) == int(np.prod(shape)):
                shape = dims
            side[b.name] = PortSpec(tuple(shape), dtype)
        held = (backend.session_heap or {}).get(skey)
        # `held`: what building it kept in the deployment itself
        out.append((shares(step), ProbeJob(str(keeper.paths[skey]), "deployed", inputs, outputs,
                                           threads, None if held is None else max(0, int(held)))))
    return out

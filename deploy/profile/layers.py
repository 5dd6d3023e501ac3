"""Per-layer times on this machine, whole and per part, with the same step models and
session settings a deployment uses, so `explore APP --evaluator <profile>` searches with
this machine's own measurements (the paper measures on the board; see
deploy/tensorrt/board_runner.py and its trt_measure.py).

A layer by parts is timed on one interior phase (the middle output row): its ring input
holds the window's rows, and the time of one call is what every phase of it costs (one part
model serves every phase; border phases feed a mask, deploy/steps/parts.py).
"""
from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx

from csdf.model import CNN, INPUT
from csdf.parts import can_split
from deploy.profile import workspace_probe
from deploy.ort.backend import OrtBackend
from deploy.steps.layer_models import layer_model


@dataclass(frozen=True)
class AloneTimes:
    """One layer timed alone: whole and (a layer that can split, in `phases` phases) one
    interior phase, ms; the workspace and session state of each of its step models, bytes
    (None where not measured: the probe needs Linux)."""
    whole_ms: float
    part_ms: float | None = None
    phases: int | None = None
    whole_ws_bytes: int | None = None
    part_ws_bytes: int | None = None
    whole_session_bytes: int | None = None
    part_session_bytes: int | None = None

    def probed(self, part: bool, workspace: int, session: int) -> AloneTimes:
        """With the probe's figures for its part (`part`) or whole step model."""
        if part:
            return replace(self, part_ws_bytes=workspace, part_session_bytes=session)
        return replace(self, whole_ws_bytes=workspace, whole_session_bytes=session)


def median_ms(call, repeats: int, warmup: int = 3) -> float:
    """Median milliseconds of `call` over `repeats` runs after `warmup` ones."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def time_layer(cnn: CNN, name: str, backend: OrtBackend, folder: Path, repeats: int,
               part: bool, jobs: list | None = None, weights: str = "float32",
               scales: dict | None = None) -> float:
    """Milliseconds of one call of layer `name` whole, or of one interior phase. With
    `jobs` (a list), also appends the step's workspace probe job to it (measured with
    others in one child: deploy/profile/workspace_probe.py). `weights`: the
    parameters' storage type (deploy/quant/stored.py), whose conversion to fp32 inside the
    step is part of its time and workspace. `scales`: an int8 step's, by layer."""
    model, ins, outs, idx = layer_model(cnn, name, backend.dtype.name, part, weights, scales)
    path = folder / cnn.name / f"{len(list(folder.rglob('*.onnx')))}.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    session = backend.load(path)
    rng = np.random.default_rng(0)
    feeds, fetches = {}, {}
    for port, const in zip(ins, idx):
        feeds[port.name] = (rng.integers(0, 256, port.stored_shape).astype(backend.dtype)
                            if backend.dtype.kind in "iu" else
                            rng.standard_normal(port.stored_shape).astype(backend.dtype))
        feeds.update(const)
    for port in outs:
        fetches[port.name] = np.zeros(port.stored_shape, backend.dtype)
    ms = median_ms(backend.bind(session, feeds, fetches), repeats)
    if jobs is not None:
        layout = backend.chosen.get(str(path), backend.layout)
        jobs.append(workspace_probe.job(path, "nchw" if layout == "nchw" else "nchwc",
                                        feeds, fetches, backend.threads))
    return ms


def step_workspace(path: Path, backend: OrtBackend, layout: str, feeds: dict, fetches: dict
                   ) -> int | None:
    """Bytes ONNX Runtime allocates while running one step beyond its bound inputs,
    outputs and weights (kernel scratch such as im2col buffers, NCHWc reorders, gathered
    windows), measured by deploy/profile/workspace_probe.py (peak RSS of a fresh thread in a child
    process, ONNX Runtime's arena off). In a deployment these bytes come from the one arena
    all steps share, so the plan counts the largest step's (explorer/throughput/runtime_costs.py). None where
    the peak cannot be reset (not Linux)."""
    if not workspace_probe.available():
        return None
    job = workspace_probe.job(path, "nchw" if layout == "nchw" else "nchwc", feeds, fetches,
                              backend.threads)
    return workspace_probe.measure([job])[0]


def profile_cnn(cnn: CNN, dtype: str = "float32", repeats: int = 20, threads: int = 0,
                progress=None, layout: str = "auto", weights: str = "float32",
                scales=None) -> dict[str, AloneTimes]:
    """Every layer's `AloneTimes` (part figures only for layers that can split; workspace
    and session figures where Linux lets the peak be reset).
    layout "auto" as `explore run` uses it: each step with the faster ORT kernel layout;
    `weights` the parameters' storage type (`time_layer`); `scales` an int8 profile's
    (ActivationScales: its stored tensors' scales, deploy/profile/app_profile.py)."""
    backend = OrtBackend(dtype, threads, layout=layout)
    table: dict[str, AloneTimes] = {}
    by_layer = scales.for_cnn(cnn.name) if scales is not None else None
    probes: list[tuple[str, bool]] = []       # (layer, part) of each workspace probe job
    jobs: list[workspace_probe.ProbeJob] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name in cnn.order():
            layer = cnn.layer(name)
            if layer.op == INPUT:
                frame = np.zeros(layer.output_shape, np.float32)
                arena = np.zeros(layer.output_shape, backend.dtype)
                if scales is None:
                    copy = lambda: np.copyto(arena, frame, casting="same_kind")  # noqa: E731
                else:     # an int8 frame is quantized as it is copied in (executor)
                    copy = lambda: np.copyto(arena, scales.quantize(cnn.name, name, frame))  # noqa: E731
                table[name] = AloneTimes(median_ms(copy, repeats))
                continue
            entry = AloneTimes(time_layer(cnn, name, backend, folder, repeats, False, jobs, weights,
                                          by_layer))
            probes.append((name, False))
            if can_split(layer) and layer.output_shape[2] > 1:
                entry = replace(entry, part_ms=time_layer(cnn, name, backend, folder, repeats, True,
                                                          jobs, weights, by_layer),
                                phases=int(layer.output_shape[2]))
                probes.append((name, True))
            table[name] = entry
            if progress:
                progress(name, entry)
        if workspace_probe.available():
            measured = workspace_probe.measure(jobs, sessions=True)
            for (name, part), (ws_bytes, state) in zip(probes, measured):
                table[name] = table[name].probed(part, int(ws_bytes), int(state))
    return table

"""The chosen plan: what `explore` writes as plan.json and `deploy` reads back.

`Plan` and its records are frozen; plan.json's keys are fixed in docs/architecture.md
("Plan"). `to_dict`/`to_json` write them with "schema": SCHEMA; explorer/plan/plan_file.py
reads them back, plans without a schema key included.
Values are kept as the file gives them: deploy/checks/plan_check.py checks them against
the CNNs before anything is deployed.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from csdf.model import EdgeId
from csdf.tiling import Group
from explorer.memory.placement.shared_objects import SharedObjects

SCHEMA = 2


@dataclass(frozen=True)
class PlanPartition:
    """A set of consecutive layers of one CNN on one processor."""
    name: str                                  # qualified: "cnn.part"
    cnn: str
    layers: tuple[str, ...]
    processor: str = "gpu"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "cnn": self.cnn, "layers": list(self.layers),
                "processor": self.processor}


@dataclass(frozen=True)
class PlanEdge:
    """Where one edge is stored: its buffer, the elements and rows it holds (rows < H: a ring
    of rows), its tensor's [N, C, H, W]."""
    buffer: int
    rows: int
    elements: int | None = None
    shape: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"buffer": self.buffer}
        if self.elements is not None:
            out["elements"] = self.elements
        out["rows"] = self.rows
        if self.shape is not None:
            out["shape"] = list(self.shape)
        return out


@dataclass(frozen=True)
class PlanBuffer:
    """One buffer: the edges stored in it, its size, and with an offset planner its place
    in the arena (bytes)."""
    edges: tuple[EdgeId, ...]
    elements: int
    bytes: int
    offset: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"edges": [str(e) for e in self.edges], "elements": self.elements, "bytes": self.bytes}
        return out if self.offset is None else out | {"offset": self.offset}


@dataclass(frozen=True)
class Constraints:
    """M^c (None: no memory constraint) and T^c per CNN."""
    memory_bytes: int | None
    fps: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"memory_bytes": self.memory_bytes, "fps": dict(self.fps)}


def group_dict(g: Group) -> dict[str, Any]:
    """A fused-tiled group as plan.json holds it: {layers, grid: [n, m]}."""
    return {"layers": list(g.layers), "grid": [g.n, g.m]}


@dataclass(frozen=True)
class Plan:
    app: str                                   # absolute path of the app file ("" if none)
    name: str
    precision: str
    data_bytes: int
    par_bytes: int
    memory_bytes: int
    param_bytes: int
    buffer_bytes: int
    fps: dict[str, float]
    constraints: Constraints
    constraints_met: bool
    phases: dict[str, dict[str, int]]          # every layer of every CNN
    partitions: tuple[PlanPartition, ...]
    pipelines: list[list[str]]
    schedules: dict[str, str]                  # compact, paper notation
    firings: dict[str, list[str]]
    edges: dict[EdgeId, PlanEdge]
    buffers: tuple[PlanBuffer, ...]
    genes: list[int] = field(default_factory=list)   # the chromosome
    # explorer.memory.placement planner (a plan file without the key: the paper's shared
    # objects); with a planner at offsets every buffer has an offset (bytes) in the arena and
    # buffer_bytes is the arena's extent
    placement: str = SharedObjects.name
    # output rows per phase {cnn: {layer: k}}, k = ceil(H / phases); empty in plans that
    # lack the key: there it follows from phases (1 or H)
    rows: dict[str, dict[str, int]] = field(default_factory=dict)
    # {cnn: {layer: primitive}} of deploy/steps/primitives (explore primitives); empty: ORT's own
    primitives: dict[str, dict[str, str]] = field(default_factory=dict)
    # fused-tiled groups (explorer/tiling/fused.py) per CNN
    tilings: dict[str, tuple[Group, ...]] = field(default_factory=dict)
    workspace_bytes: int = 0                   # measured backend scratch, part of memory_bytes
    session_bytes: int = 0                     # measured session state, part of memory_bytes
    output_bytes: int = 0                      # the CNNs' output arrays, part of memory_bytes
    # what the fps were predicted for: "cpu:<machine>" (memtrade/platform.py) or the
    # profile's name, e.g. jetson-tx2 (extra key; "" = not recorded)
    platform: str = ""
    # precision per layer {cnn: {layer: fp32|fp16|int8}} of a `precision: auto` plan
    # (explorer/app/layer_precision.py): its precision is "auto", its buffers' elements and
    # bytes both count bytes (data_bytes 1) and par_bytes is 1 (param_bytes sums each
    # layer's parameters at its own width); empty: every layer at `precision`
    layer_precisions: dict[str, dict[str, str]] = field(default_factory=dict)
    # each CNN's output SQNR against fp32 (dB) that the sensitivity tables estimate for those
    # precisions (explorer/plan/sensitivity.py); empty without layer_precisions
    sqnr_estimate_db: dict[str, float] = field(default_factory=dict)
    # and measured: the network rounded as a deployment of those precisions rounds it
    # (deploy/checks/layer_reference.py) on the calibration frames, by ONNX Runtime
    sqnr_reference_db: dict[str, float] = field(default_factory=dict)
    # the frames and calibration method both were measured with (memtrade/sensitivity.py
    # `frames_record`: "frames" a path or "generated", "sha256", "method"), which a deployment
    # must calibrate its int8 scales with for the figures to hold
    sqnr_frames: dict[str, str] = field(default_factory=dict)

    def placed(self) -> bool:
        """Every buffer has an arena offset (an offset planner's plan)."""
        return bool(self.buffers) and all(b.offset is not None for b in self.buffers)

    def to_dict(self) -> dict[str, Any]:
        """plan.json's data."""
        return {  # noqa: E131
            "schema": SCHEMA, "app": self.app, "name": self.name, "precision": self.precision,
            "data_bytes": self.data_bytes, "par_bytes": self.par_bytes,
            "memory_bytes": self.memory_bytes, "param_bytes": self.param_bytes,
            "buffer_bytes": self.buffer_bytes, "fps": dict(self.fps),
            "constraints": self.constraints.to_dict(), "constraints_met": self.constraints_met,
            "phases": {c: dict(ph) for c, ph in self.phases.items()},
            "partitions": [p.to_dict() for p in self.partitions],
            "pipelines": [list(g) for g in self.pipelines],
            "schedules": dict(self.schedules),
            "firings": {n: list(f) for n, f in self.firings.items()},
            "edges": {str(k): e.to_dict() for k, e in self.edges.items()},
            "buffers": [b.to_dict() for b in self.buffers],
            "genes": list(self.genes), "placement": self.placement,
            "rows": {c: dict(r) for c, r in self.rows.items()},
            "primitives": {c: dict(p) for c, p in self.primitives.items()},
            "tilings": {c: [group_dict(g) for g in gs] for c, gs in self.tilings.items()},
            "workspace_bytes": self.workspace_bytes, "session_bytes": self.session_bytes,
            "output_bytes": self.output_bytes} | ({"platform": self.platform} if self.platform else {}) | (
            {"layer_precisions": {c: dict(p) for c, p in self.layer_precisions.items()},
             "sqnr_estimate_db": {c: (v if math.isfinite(v) else None)
                                  for c, v in self.sqnr_estimate_db.items()},
             "sqnr_reference_db": {c: (v if math.isfinite(v) else None)
                                   for c, v in self.sqnr_reference_db.items()},
             **({"sqnr_frames": dict(self.sqnr_frames)} if self.sqnr_frames else {})}
            if self.layer_precisions else {})


def to_json(plan: Plan, path: str | Path) -> None:
    Path(path).write_text(json.dumps(plan.to_dict(), indent=1) + "\n")

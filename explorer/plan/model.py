"""The chosen plan: what `explore` writes as plan.json and `deploy` reads back.

Keys are fixed in docs/architecture.md ("Plan"); `to_json`/`from_json` round-trip them.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from sdf3.errors import InputError


@dataclass
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
    constraints: dict[str, Any]                # {"memory_bytes": int | None, "fps": {cnn: v}}
    constraints_met: bool
    phases: dict[str, dict[str, int]]          # every layer of every CNN
    partitions: list[dict[str, Any]]           # [{name, cnn, layers, processor}]
    pipelines: list[list[str]]
    schedules: dict[str, str]                  # compact, paper notation
    firings: dict[str, list[str]]
    edges: dict[str, dict[str, Any]]           # {edge: {buffer, elements, rows, shape}}
    buffers: list[dict[str, Any]]              # [{edges, elements, bytes}]
    genes: list[int] = field(default_factory=list)   # the chromosome (extra key)
    # explorer.memory.placement planner; with offsets every buffer has "offset" (bytes) in the
    # arena and buffer_bytes is the arena's extent (extra key; absent = shared objects)
    placement: str = "shared-objects"
    # output rows per phase {cnn: {layer: k}}, k = ceil(H / phases); absent from plans
    # written before granularity genes: there it follows from phases (1 or H)
    rows: dict[str, dict[str, int]] = field(default_factory=dict)
    # {cnn: {layer: primitive}} of deploy/steps/primitives (explore primitives); empty: ORT's own
    primitives: dict[str, dict[str, str]] = field(default_factory=dict)
    # fused-tiled groups (explorer/tiling/fused.py): {cnn: [{layers, grid: [n, m]}]} (extra key)
    tilings: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    workspace_bytes: int = 0                   # measured backend scratch, part of memory_bytes
    session_bytes: int = 0                     # measured session state, part of memory_bytes
    output_bytes: int = 0                      # the CNNs' output arrays, part of memory_bytes
    # what the fps were predicted for: "cpu:<machine>" (explorer/cli/cpu_profile.py) or the
    # profile's name, e.g. jetson-tx2 (extra key; "" = not recorded)
    platform: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


OPTIONAL = ("genes", "rows", "primitives", "tilings", "workspace_bytes", "session_bytes", "output_bytes",
            "placement", "platform")


def to_json(plan: Plan, path: str | Path) -> None:
    Path(path).write_text(json.dumps(plan.to_dict(), indent=1) + "\n")


def from_dict(data: dict[str, Any], where: str = "plan.json") -> Plan:
    names = [f.name for f in fields(Plan)]
    required = [f.name for f in fields(Plan) if f.name not in OPTIONAL]
    missing = [k for k in required if k not in data]
    if missing:
        raise InputError(f"{where}: missing key {missing[0]!r}")
    return Plan(**{k: data[k] for k in names if k in data})


def from_json(path: str | Path) -> Plan:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: cannot read a plan ({err})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return from_dict(data, str(path))

"""plan.json read back into a Plan (explorer/plan/model.py).

A plan is a file a user may edit or damage: a shape that is not a plan's (a missing key, a
list where a mapping belongs, an edge key that is not an edge name) is refused here with
one line naming the file and the key. Values are kept as written; whether they fit the
CNNs (layers, edges, phases, ring sizes, buffers) is deploy/checks/plan_check.py's question.
Plans written before the "schema" key load as schema 2: their keys are the same.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

from csdf.model import EdgeId
from csdf.tiling import Group
from explorer.plan.model import SCHEMA, Constraints, Plan, PlanBuffer, PlanEdge, PlanPartition
from sdf3.errors import InputError

REQUIRED = ("app", "name", "precision", "data_bytes", "par_bytes", "memory_bytes", "param_bytes",
            "buffer_bytes", "fps", "constraints", "constraints_met", "phases", "partitions",
            "pipelines", "schedules", "firings", "edges", "buffers")
OPTIONAL = ("genes", "placement", "rows", "primitives", "workspace_bytes", "session_bytes",
            "output_bytes", "platform")


def from_json(path: str | Path) -> Plan:
    from explorer.app.input_file import read_json
    return from_dict(read_json(path, "a plan.json written by `explore APP.yaml`"), str(path))


def from_dict(data: Any, where: str = "plan.json") -> Plan:
    """The Plan of plan.json's data; InputError "`where`: key: what was expected"."""
    def fail(msg: str) -> NoReturn:
        raise InputError(f"{where}: {msg}")

    if not isinstance(data, dict):
        fail("expected a JSON object")
    if data.get("schema", SCHEMA) != SCHEMA:
        fail(f"key 'schema': expected {SCHEMA}, got {data['schema']!r}")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        fail(f"missing key {missing[0]!r}")
    return Plan(**{k: data[k] for k in REQUIRED + OPTIONAL if k in data} | {
        "constraints": _constraints(data["constraints"], fail),
        "partitions": _partitions(data["partitions"], fail),
        "edges": _edges(data["edges"], where, fail),
        "buffers": _buffers(data["buffers"], where, fail),
        "tilings": _tilings(data.get("tilings") or {}, fail),
        "layer_precisions": _layer_precisions(data.get("layer_precisions") or {}, fail),
        "sqnr_estimate_db": _decibels("sqnr_estimate_db", data.get("sqnr_estimate_db") or {}, fail),
        "sqnr_reference_db": _decibels("sqnr_reference_db", data.get("sqnr_reference_db") or {}, fail),
        "sqnr_frames": _strings("sqnr_frames", data.get("sqnr_frames") or {}, fail)})


def _strings(key: str, raw: Any, fail) -> dict[str, str]:
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        fail(f"key '{key}': expected an object of strings")
    return {str(k): v for k, v in raw.items()}


def _decibels(key: str, raw: Any, fail) -> dict[str, float]:
    """{cnn: dB}; null is an infinite SQNR (every layer at fp32)."""
    if not isinstance(raw, dict) or not all(v is None or isinstance(v, (int, float)) and not
                                            isinstance(v, bool) for v in raw.values()):
        fail(f"key '{key}': expected {{cnn: dB or null}}")
    return {str(c): float("inf") if v is None else float(v) for c, v in raw.items()}


def _layer_precisions(raw: Any, fail) -> dict[str, dict[str, str]]:
    """{cnn: {layer: precision}}, each precision one a layer may run at (LADDER)."""
    from explorer.app.layer_precision import LADDER
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        fail("key 'layer_precisions': expected {cnn: {layer: precision}}")
    for cnn, layers in raw.items():
        for layer, name in layers.items():
            if name not in LADDER:
                fail(f"key 'layer_precisions.{cnn}.{layer}': expected one of {', '.join(LADDER)}, "
                     f"got {name!r}")
    return {str(c): {str(k): str(v) for k, v in ls.items()} for c, ls in raw.items()}


def _constraints(raw: Any, fail) -> Constraints:
    if not isinstance(raw, dict) or not isinstance(raw.get("fps") or {}, dict):
        fail("key 'constraints' must be {memory_bytes, fps: {cnn: fps}}")
    return Constraints(raw.get("memory_bytes"), dict(raw.get("fps") or {}))


def _partitions(raw: Any, fail) -> tuple[PlanPartition, ...]:
    if not isinstance(raw, list) or not raw:
        fail("key 'partitions' must be a non-empty list")
    out = []
    for i, part in enumerate(raw):
        if not isinstance(part, dict) or not isinstance(part.get("name"), str) \
                or not isinstance(part.get("layers"), list):
            fail(f"partitions[{i}]: expected {{name, cnn, layers, processor}}")
        out.append(PlanPartition(part["name"], part.get("cnn"), tuple(part["layers"]),
                                 part.get("processor", "gpu")))
    return tuple(out)


def _edges(raw: Any, where: str, fail) -> dict[EdgeId, PlanEdge]:
    if not isinstance(raw, dict):
        fail("key 'edges' must map edge names to {buffer, elements, rows, shape}")
    out = {}
    for key, e in raw.items():
        name = EdgeId.parse(key, f"{where}: edges")
        if not isinstance(e, dict) or "buffer" not in e or "rows" not in e:
            fail(f"edges.{key}: expected integer 'buffer' and 'rows'")
        shape = e.get("shape")
        out[name] = PlanEdge(e["buffer"], e["rows"], e.get("elements"),
                             tuple(shape) if isinstance(shape, list) else shape)
    return out


def _buffers(raw: Any, where: str, fail) -> tuple[PlanBuffer, ...]:
    if not isinstance(raw, list) or not all(isinstance(b, dict) for b in raw):
        fail("key 'buffers' must be a list of {edges, elements, bytes}")
    out = []
    for k, b in enumerate(raw):
        if not isinstance(b.get("edges"), list) or "elements" not in b or "bytes" not in b:
            fail(f"buffers[{k}]: expected {{edges, elements, bytes}}")
        edges = tuple(EdgeId.parse(n, f"{where}: buffers[{k}].edges") for n in b["edges"])
        out.append(PlanBuffer(edges, b["elements"], b["bytes"], b.get("offset")))
    return tuple(out)


def _tilings(raw: Any, fail) -> dict[str, tuple[Group, ...]]:
    try:
        return {c: tuple(Group(tuple(g["layers"]), int(g["grid"][0]), int(g["grid"][1])) for g in gs)
                for c, gs in raw.items()}
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        fail("key 'tilings' must map each CNN to [{layers: [...], grid: [n, m]}]")

"""What a file given to a command is, so a file given to the wrong command gets one line
saying what it is and which command takes it.

memtrade's commands read five kinds of file: application files (YAML, `explore APP.yaml`),
ONNX models (named by an application file), plans (`plan.json`, `explore deploy`), Pareto
fronts (`pareto.json`, written beside the plan), deployment manifests (`manifest.json` inside
the folder that `explore run` takes) and device profiles (YAML, `--evaluator FILE`).
`kind_of` tells them apart by content, never by name; `wrong_file` turns a mismatch into the
line the command prints.

>>> from pathlib import Path; import tempfile, json
>>> p = Path(tempfile.mkdtemp()) / "x.json"
>>> _ = p.write_text(json.dumps({"cnns": ["a"], "genes": [], "points": []}))
>>> kind_of(p)
'pareto'
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

APP, ONNX, PLAN, PARETO, MANIFEST, PROFILE = "app", "onnx", "plan", "pareto", "manifest", "profile"

DESCRIPTION = {
    APP: "an application file: give it to `explore APP.yaml`",
    ONNX: "an ONNX model: name it as a CNN's `model:` in an application file and give that "
          "file to `explore`",
    PLAN: "a plan (plan.json, written by `explore APP.yaml`): give it to `explore deploy PLAN.json`",
    PARETO: "a Pareto front (pareto.json, written by `explore APP.yaml`): deploy the plan.json "
            "beside it, or a point of it with `explore deploy PLAN.json --point N`",
    MANIFEST: "a deployment manifest (written by `explore deploy`): give its folder to "
              "`explore run DIR`",
    PROFILE: "a device profile (written by `explore profile`): give it to `explore APP.yaml "
             "--evaluator FILE`",
}
EXPECTED = {APP: "an application file (YAML)", PLAN: "a plan.json written by `explore APP.yaml`",
            MANIFEST: "a deployment folder written by `explore deploy`"}
SNIFF_BYTES = 1 << 20        # enough of any YAML or JSON file to tell what it is


def _json_kind(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    if data.get("format") == "memtrade-deployment":
        return MANIFEST
    if data.get("format") == "memtrade-profile":
        return PROFILE
    if {"phases", "buffers", "precision"} <= data.keys():
        return PLAN
    if {"cnns", "genes", "points"} <= data.keys():
        return PARETO
    return _mapping_kind(data)


def _mapping_kind(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    if data.get("format") == "memtrade-profile":
        return PROFILE
    return APP if "cnns" in data else None


def _is_onnx(raw: bytes) -> bool:
    """An ONNX ModelProto: protobuf that parses with a graph of at least one node."""
    from google.protobuf.message import DecodeError
    import onnx
    model = onnx.ModelProto()
    try:
        model.ParseFromString(raw)
    except (DecodeError, ValueError, RuntimeError):
        return False
    return model.ir_version > 0 and model.HasField("graph") and len(model.graph.node) > 0


def kind_of(path: str | Path) -> str | None:
    """The kind of the file at `path` (one of the module's constants), or None when it is
    none of them or cannot be read."""
    from explorer.app.input_file import not_regular
    path = Path(path)
    if path.is_dir():
        return MANIFEST if (path / "manifest.json").is_file() else None
    if not_regular(path):          # a FIFO would block the read: never opened
        return None
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    try:
        text = raw[:SNIFF_BYTES].decode("utf-8")
    except UnicodeDecodeError:
        return ONNX if _is_onnx(raw) else None
    if text.lstrip().startswith(("{", "[")):
        try:
            return _json_kind(json.loads(raw))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            return None
    import yaml
    from explorer.app.yamlload import StrictLoader
    try:        # strictly, as the commands read it: no alias bombs, no unbounded nesting
        return _mapping_kind(yaml.load(text, Loader=StrictLoader))   # noqa: S506 (SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return ONNX if _is_onnx(raw) else None


def wrong_file(path: str | Path, expected: str) -> str | None:
    """The line for a file of another kind than `expected` (APP, PLAN or MANIFEST) given to a
    command, or None when the file is of that kind or of no kind known here (the command's
    own checks then say what is wrong)."""
    kind = kind_of(path)
    if kind is None or kind == expected:
        return None
    return f"{path}: expected {EXPECTED[expected]}, but this is {DESCRIPTION[kind]}"

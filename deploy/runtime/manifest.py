"""The deployment manifest: everything a runner needs, as plain JSON (docs/deploy.md).

The board runner reads the same file under Python 3.6, so every offset, shape, slot and
index is resolved here and nothing needs the CNN model or the plan at run time.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from csdf.model import EdgeId
from sdf3.errors import InputError

FORMAT = "memtrade-deployment"
VERSION = 1
FILE = "manifest.json"


def save(manifest: dict[str, Any], out_dir: str | Path) -> Path:
    path = Path(out_dir) / FILE
    path.write_text(json.dumps(manifest, indent=1))
    return path


def load(deploy_dir: str | Path) -> dict[str, Any]:
    path = Path(deploy_dir) / FILE
    if not path.is_file():
        raise InputError(f"{path}: no deployment manifest (expected the DIR of `explore deploy`)")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"{path}: key 'format' must be '{FORMAT}'")
    if data.get("version") != VERSION:
        raise InputError(f"{path}: key 'version' must be {VERSION}, got {data.get('version')!r}")
    return data


def firings_per_frame(manifest: dict[str, Any]) -> dict[str, int]:
    """Steps of every CNN's partitions: what calls_per_frame must equal."""
    out: dict[str, int] = {}
    for part in manifest["partitions"]:
        out[part["cnn"]] = out.get(part["cnn"], 0) + len(part["steps"])
    return out


def stored_as(edges: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Edge name -> the name of the first edge (sorted) stored in the same bytes: edges of
    one tensor in one buffer (explorer/memory/tensors.py) are one stored tensor that its
    producer writes once and every reader binds; any other edge stands for itself."""
    first: dict[tuple, str] = {}
    out: dict[str, str] = {}
    for name in sorted(edges):
        edge, e = EdgeId.parse(name), edges[name]
        key = (edge.cnn, edge.src, e.get("buffer"), e.get("offset"), e.get("bytes"))
        out[name] = first.setdefault(key, name)
    return out


def stored_outputs(readers: list[str], copies: Callable[[str], list[str]],
                   edges: dict[str, dict[str, Any]]) -> list[tuple[list[str], list[str]]]:
    """The stored tensors a layer writes, each once however many layers read it: per tensor
    (the edges to `readers` held in the same buffers), the edge copies of its first reader
    and all its readers. `copies(reader)`: the edge's names on even and odd frames."""
    out: dict[tuple, tuple[list[str], list[str]]] = {}
    for d in readers:
        cp = copies(d)
        where = tuple(edges[c]["buffer"] for c in cp)
        if where in out:
            out[where][1].append(d)
        else:
            out[where] = (cp, [d])
    return list(out.values())

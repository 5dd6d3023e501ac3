"""The deployment manifest's file: manifest.json, the records of
deploy/runtime/manifest_records.py as JSON (docs/deploy.md), and what is computed from it.

The board runner reads the same file under Python 3.6, so every offset, shape, slot and
index is resolved at deploy time and nothing needs the CNN model or the plan at run time.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping

from csdf.model import EdgeId
from deploy.runtime.manifest_records import FORMAT, VERSION, Manifest  # noqa: F401
from sdf3.errors import InputError

FILE = "manifest.json"


def save(manifest: Manifest, out_dir: str | Path) -> Path:
    path = Path(out_dir) / FILE
    path.write_text(json.dumps(manifest.to_dict(), indent=1))
    return path


def load(deploy_dir: str | Path) -> Manifest:
    """The manifest of the deployment in `deploy_dir`; InputError (one line) for a missing,
    unreadable, foreign or older file, or a key of the wrong type."""
    path = Path(deploy_dir) / FILE
    if not path.is_file():
        raise InputError(f"{path}: no deployment manifest (expected the DIR of `explore deploy`)")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"{path}: key 'format' must be '{FORMAT}'")
    version = data.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version < VERSION:
        raise InputError(f"{path}: a deployment of manifest version {version}, this memtrade "
                         f"reads version {VERSION}: run `explore deploy` on its plan again")
    if version != VERSION:
        raise InputError(f"{path}: key 'version' must be {VERSION}, got {version!r}")
    return Manifest.from_dict(data, str(path))


def firings_per_frame(manifest: Manifest) -> dict[str, int]:
    """Steps of every CNN's partitions: what calls_per_frame must equal."""
    out: dict[str, int] = {}
    for part in manifest.partitions:
        out[part.cnn] = out.get(part.cnn, 0) + len(part.steps)
    return out


def _place(e: Any, key: str) -> Any:
    """A field of an edge: a manifest or plan record, or a plan edge read from JSON."""
    return e.get(key) if isinstance(e, Mapping) else getattr(e, key, None)


def stored_as(edges: Mapping[str, Any]) -> dict[str, str]:
    """Edge name -> the name of the first edge (sorted) stored in the same bytes: edges of
    one tensor in one buffer (explorer/memory/tensors.py) are one stored tensor that its
    producer writes once and every reader binds; any other edge stands for itself.
    `edges`: the manifest's (or the plan's) edges by name."""
    first: dict[tuple, str] = {}
    out: dict[str, str] = {}
    for name in sorted(edges):
        edge, e = EdgeId.parse(str(name)), edges[name]
        key = (edge.cnn, edge.src, _place(e, "buffer"), _place(e, "offset"), _place(e, "bytes"))
        out[name] = first.setdefault(key, name)
    return out


def stored_outputs(readers: list[str], copies: Callable[[str], list[str]],
                   edges: Mapping[str, Any]) -> list[tuple[list[str], list[str]]]:
    """The stored tensors a layer writes, each once however many layers read it: per tensor
    (the edges to `readers` held in the same buffers), the edge copies of its first reader
    and all its readers. `copies(reader)`: the edge's names on even and odd frames."""
    out: dict[tuple, tuple[list[str], list[str]]] = {}
    for d in readers:
        cp = copies(d)
        where = tuple(_place(edges[c], "buffer") for c in cp)
        if where in out:
            out[where][1].append(d)
        else:
            out[where] = (cp, [d])
    return list(out.values())

"""`memtrade.load_app`: an application from its file or from a mapping of the same keys,
with the checks and one-line refusals of the command line (explorer/app/appfile.py,
docs/appfile.md); `with_constraints`: the same application under other constraints.

>>> import memtrade
>>> app = memtrade.load_app({"name": "tiny", "platform": "jetson-tx2", "precision": "fp16",
...                          "cnns": [{"name": "net", "model": "zoo:mobilenet_v2"}]})
>>> list(app.cnns), app.precision.name
(['net'], 'fp16')
"""
from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from explorer.app.appfile import fps_override, from_document, load_app as load_app_file
from explorer.app.model import PRECISIONS, PREFER, Application
from explorer.app.layer_precision import AUTO, LADDER
from explorer.app.units import parse_memory
from sdf3.errors import InputError

MAPPING = "<mapping>"     # how refusals name an app given as a mapping


def load_app(source: str | Path | Mapping[str, Any], *, mem: str | int | None = None,
             fps: float | str | Mapping[str, float] | None = None, precision: str | None = None,
             prefer: str | None = None, base_dir: str | Path | None = None) -> Application:
    """The application in app file `source`, or described by mapping `source` (the app
    file's keys; model paths relative to `base_dir`, default the current directory).
    `mem`, `fps`, `precision` and `prefer` override the app's (as `explore --mem ...`).
    Bad input raises memtrade.InputError, one line naming the file or key."""
    overrides = dict(mem=_as_text(mem), fps=_fps_text(fps), precision=precision, prefer=prefer)
    if isinstance(source, Mapping):
        base = Path(base_dir or Path.cwd()).resolve()
        doc = _absolute_models(copy.deepcopy(dict(source)), base)
        app = from_document(doc, base / MAPPING, **overrides)
        app.path, app.document = None, doc
        return app
    if isinstance(source, (str, Path)):
        return load_app_file(source, **overrides)
    raise InputError(f"app: expected an app file's path or a mapping, got {type(source).__name__}")


def _as_text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else repr(value) \
        if isinstance(value, bool) else str(value)


def _fps_text(fps: Any) -> str | None:
    """`fps` as the command line's --fps: "71" or "name=71,name2=30"."""
    if isinstance(fps, Mapping):
        return ",".join(f"{name}={value}" for name, value in fps.items())
    return _as_text(fps)


def _absolute_models(doc: dict, base: Path) -> dict:
    """Model paths of a mapping made absolute, so the app reads the same models wherever
    it is written (Exploration.write puts it beside the plan as app.yaml)."""
    for cnn in doc.get("cnns") or []:
        model = cnn.get("model") if isinstance(cnn, dict) else None
        if isinstance(model, str) and not model.startswith("zoo:") and not Path(model).is_absolute():
            cnn["model"] = str(base / model)
    return doc


def with_constraints(app: Application, mem: str | int | None = None,
                     fps: float | str | Mapping[str, float] | None = None,
                     prefer: str | None = None, precision: str | None = None,
                     placement: str | None = None) -> Application:
    """A copy of `app` with the constraints, preference, precision and placement given (None:
    the app's own). `mem` in bytes or as "8MB" (0: the least memory as a goal); `fps` one
    value for every CNN, "name=71,...", or a mapping by CNN name."""
    changes: dict[str, Any] = {}
    if mem is not None:
        changes["memory"] = _memory(mem)
    if fps is not None:
        changes["fps"] = {**app.fps, **_fps(fps, app)}
    if prefer is not None:
        if prefer not in PREFER:
            raise InputError(f"prefer: expected one of {', '.join(PREFER)}, got {prefer!r}")
        changes["prefer"] = prefer
    if precision is not None:
        changes["precision"] = _precision(precision, app)
        changes["precisions"] = LADDER if precision == AUTO else ()
    if placement is not None:
        changes["placement"] = _placement(placement)
    return replace(app, **changes) if changes else app


def _memory(mem: str | int) -> int:
    if isinstance(mem, bool):
        raise InputError(f"mem: expected bytes or a figure such as 8MB, got {mem!r}")
    if isinstance(mem, int):
        if mem < 0:
            raise InputError(f"mem: expected bytes >= 0, got {mem}")
        return mem
    return parse_memory(str(mem), "mem")


def _fps(fps: float | str | Mapping[str, float], app: Application) -> dict[str, float]:
    if isinstance(fps, Mapping):
        unknown = [c for c in fps if c not in app.cnns]
        if unknown:
            raise InputError(f"fps: no CNN named {unknown[0]!r} (the app has {', '.join(app.cnns)})")
        return {c: fps_override(f"{c}={v}", app.cnns)[c] for c, v in fps.items()}
    return fps_override(str(fps), app.cnns)


def _precision(name: str, app: Application):
    """The app's `precision` for `name`; for `auto` (a precision per layer) fp32, the reference."""
    if name not in PRECISIONS and name != AUTO:
        raise InputError(f"precision: expected one of {', '.join(PRECISIONS)} or {AUTO}, got {name!r}")
    quantized = [n for n, c in app.cnns.items() if c.quantized is not None]
    if quantized and name != "int8":
        raise InputError(f"precision: CNN {quantized[0]!r} is a quantized (QDQ) model, an int8 "
                         f"network; expected int8, got {name!r}")
    return PRECISIONS.get(name, PRECISIONS["fp32"])


def _placement(name: str) -> str:
    from explorer.memory.placement import planner
    return planner(name).name          # an unknown name is one line naming the known ones

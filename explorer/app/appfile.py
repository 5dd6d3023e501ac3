"""Read and validate an application file (docs/appfile.md) into an `Application`.

Every bad input raises InputError with one line: the file, the key path (e.g.
`cnns[0].partitions[1].layers`) and what was expected, so the CLI can exit 2 with it.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from csdf.machine_bound import check_cnn
from csdf.model import CNN, INPUT
from csdf.onnx_import import load_onnx
from csdf.synthetic import build_synthetic
from explorer.app.model import (EFFORTS, GRANULARITIES, PRECISIONS, PREFER, Application, Partition,
                                SearchSettings)
from explorer.app.input_file import not_regular
from explorer.app.layer_names import resolve
from explorer.app.layer_precision import AUTO, LADDER
from explorer.app.units import parse_memory
from explorer.app.yamlload import load_yaml
from sdf3.errors import InputError

TOP_KEYS = ("name", "description", "platform", "threads", "precision", "min_sqnr_db", "memory",
            "prefer", "cnns", "pipelines", "schedules", "search")
CNN_KEYS = ("name", "model", "fps", "partitions", "input_shape")
PARTITION_KEYS = ("name", "layers", "processor")
PROCESSORS = ("gpu", "cpu")
MAX_FPS = 1e9                # frames per second: beyond any device (and any typo's intent)
# search sizes beyond these are typing errors that would run for days or exhaust memory
SEARCH_LIMITS = {"population": 100_000, "generations": 1_000_000, "seed": 2**32 - 1,
                 "time_limit": 7 * 24 * 3600,
                 "workers": 256, "relink_rounds": 1000, "local_rounds": 1000}
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def load_app(path: str | Path, mem: str | None = None, fps: str | None = None,
             precision: str | None = None, fused: bool = True,
             prefer: str | None = None) -> Application:
    """The application in `path`; `mem`, `fps`, `precision` and `prefer` override the file
    (CLI's --mem "8MB", --fps "71" or "name=71,name2=30", --precision fp16, --prefer fps)."""
    path = Path(path)
    return from_document(_read_yaml(path), path, mem, fps, precision, fused, prefer)


def from_document(doc: Any, path: Path, mem: str | None = None, fps: str | None = None,
                  precision: str | None = None, fused: bool = True,
                  prefer: str | None = None) -> Application:
    """The application a parsed app file describes; `path` names it in refusals and its
    folder is where relative model paths start (a mapping given in a program: a name in the
    folder its models are relative to)."""
    where = str(path)
    if not isinstance(doc, dict):
        raise InputError(f"{where}: expected a mapping with keys {', '.join(TOP_KEYS)}")
    _check_keys(doc, TOP_KEYS, where, "")
    name = doc.get("name", path.stem)
    if not isinstance(name, str) or not name:
        raise InputError(f"{where}: name: expected a non-empty string")

    cnns: dict[str, CNN] = {}
    partitions: list[Partition] = []
    fps_by_cnn: dict[str, float] = {}
    raw_cnns = doc.get("cnns")
    if not isinstance(raw_cnns, list) or not raw_cnns:
        raise InputError(f"{where}: cnns: expected a non-empty list of CNNs")
    for i, raw in enumerate(raw_cnns):
        key = f"cnns[{i}]"
        _check_keys(raw, CNN_KEYS, where, key)
        cnn_name = _name(raw, where, key)
        if cnn_name in cnns:
            raise InputError(f"{where}: {key}.name: CNN {cnn_name!r} is listed twice")
        cnn = _load_model(raw.get("model"), cnn_name, path, key, fused, raw.get("input_shape"))
        cnns[cnn_name] = cnn
        fps_by_cnn[cnn_name] = _fps_value(raw.get("fps", 0), f"{where}: {key}.fps")
        partitions += _partitions(raw.get("partitions"), cnn, where, f"{key}.partitions")

    if fps is not None:
        fps_by_cnn.update(fps_override(fps, cnns))
    pipelines = _pipelines(doc.get("pipelines"), partitions, where)
    schedules = _schedules(doc.get("schedules"), partitions, cnns, where)
    quantized = [n for n, c in cnns.items() if c.quantized is not None]   # QDQ models: int8
    prec = precision if precision is not None else doc.get("precision", "int8" if quantized else "fp32")
    if not isinstance(prec, str) or prec not in PRECISIONS and prec != AUTO:
        raise InputError(f"{where}: precision: expected one of {', '.join(PRECISIONS)} or {AUTO}, "
                         f"got {prec!r}")
    if quantized and prec != "int8":
        raise InputError(f"{where}: precision: CNN {quantized[0]!r} is a quantized (QDQ) model, an int8 "
                         f"network; expected int8 or no precision, got {prec!r}")
    chosen_by = prefer if prefer is not None else doc.get("prefer")
    if chosen_by is not None and chosen_by not in PREFER:
        raise InputError(f"{where}: prefer: expected one of {', '.join(PREFER)}, got {chosen_by!r}")
    memory = mem if mem is not None else doc.get("memory")
    memory_bytes = None if memory is None else parse_memory(
        memory, "--mem" if mem is not None else f"{where}: memory")
    return Application(
        name=name, cnns=cnns, partitions=partitions, pipelines=pipelines,
        precision=PRECISIONS.get(prec, PRECISIONS["fp32"]), precisions=LADDER if prec == AUTO else (),
        min_sqnr_db=min_sqnr(doc.get("min_sqnr_db"), prec, f"{where}: min_sqnr_db"), platform=_platform(doc.get("platform", "jetson-tx2"), path),
        memory=memory_bytes, fps=fps_by_cnn, prefer=chosen_by, schedules=schedules,
        search=_search(doc.get("search"), where), path=path.resolve(),
        threads=_threads(doc.get("threads", 1), where))


def min_sqnr(value: Any, precision: str, where: str) -> float | None:
    """`min_sqnr_db`: a finite number of dB, a constraint of `precision: auto` only."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{where}: expected a number of dB (the output's SQNR against fp32), got {value!r}")
    if precision != AUTO:
        raise InputError(f"{where}: a constraint of precision: {AUTO}, expected no min_sqnr_db "
                         f"with precision {precision}")
    return float(value)


# ---- reading ------------------------------------------------------------------------------
def _read_yaml(path: Path) -> dict[str, Any]:
    doc = load_yaml(path, "an application file")
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a mapping with keys {', '.join(TOP_KEYS)}")
    return doc


def _name(doc: dict, where: str, key: str) -> str:
    """A CNN's or partition's name: it becomes part of file names and plan keys."""
    value = doc.get("name")
    if not isinstance(value, str) or not NAME.match(value):
        raise InputError(f"{where}: {key}.name: expected a name of letters, digits, '_' or '-', got {value!r}")
    return value


def _check_keys(doc: Any, allowed: tuple[str, ...], where: str, key: str) -> None:
    label = f"{where}: {key}" if key else where
    if not isinstance(doc, dict):
        raise InputError(f"{label}: expected a mapping with keys {', '.join(allowed)}")
    for k in doc:
        if k not in allowed:
            full = f"{key}.{k}" if key else str(k)
            raise InputError(f"{where}: {full}: unknown key; expected one of {', '.join(allowed)}")


def _load_model(model: Any, name: str, app: Path, entry: str, fused: bool,
                input_shape: Any = None) -> CNN:
    """The CNN of one `cnns` entry; `input_shape` fixes an ONNX model's dynamic input
    dimensions (csdf/onnx_inputs.py)."""
    where = f"{app}: {entry}.model"
    if isinstance(model, dict) and set(model) == {"synthetic"}:
        if input_shape is not None:
            raise InputError(f"{app}: {entry}.input_shape: expected only with an ONNX model; "
                             f"a synthetic CNN's shapes are in its own keys")
        cnn = build_synthetic(model["synthetic"], name, f"{where}.synthetic")
        check_cnn(cnn, where)
        return cnn
    if not isinstance(model, str) or not model:
        raise InputError(f"{where}: expected zoo:NAME, a path to an .onnx file, or {{synthetic: ...}}")
    if model.startswith("zoo:"):
        file = _zoo_path(model[4:], where)
    else:
        file = (app.parent / model) if not Path(model).is_absolute() else Path(model)
        if not file.is_file():
            found = not_regular(file)
            raise InputError(f"{where}: model file {model!r} " + (
                f"is {found}, expected an ONNX file" if found else
                "not found (paths are relative to the app file)"))
    try:
        cnn = load_onnx(file, name, fused=fused, input_shape=input_shape)
    except InputError as err:
        text = str(err).replace("input_shape", f"{entry}.input_shape")
        raise InputError(f"{where}: {text}") from None
    check_cnn(cnn, where)      # csdf/machine_bound.py: before the search sizes anything
    return cnn


def _zoo_path(zoo_name: str, where: str) -> Path:
    try:
        from csdf import zoo
    except ImportError as err:  # the zoo is a separate module; say so plainly
        raise InputError(f"{where}: the model zoo is not available ({err})") from None
    names = getattr(zoo, "ALL_NAMES", None) or getattr(zoo, "NAMES", None)   # trunks too
    if names is not None and zoo_name not in names:
        raise InputError(f"{where}: unknown zoo model {zoo_name!r}; expected one of {', '.join(names)}")
    try:
        return Path(zoo.model_path(zoo_name))
    except InputError as err:
        raise InputError(f"{where}: {err}") from None
    except (KeyError, ValueError) as err:
        raise InputError(f"{where}: zoo model {zoo_name!r}: {err}") from None


def _platform(value: Any, app: Path) -> str:
    """A built-in profile name as is; a path relative to the app file made absolute."""
    if not isinstance(value, str) or not value:
        raise InputError(f"{app}: platform: expected a device profile name or a path to a profile file")
    local = app.parent / value
    if ("/" in value or value.endswith((".yaml", ".yml", ".json"))) and local.is_file():
        return str(local.resolve())
    return value


def _threads(value: Any, where: str) -> int:
    """ONNX Runtime intra-op threads of `platform: cpu`: a whole number from 1 to 1024."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
        raise InputError(f"{where}: threads: expected a whole number of threads from 1 to 1024, "
                         f"got {value!r}")
    return value


# ---- partitions, pipelines, schedules -----------------------------------------------------
def _partitions(raw: Any, cnn: CNN, where: str, key: str) -> list[Partition]:
    """Contiguous ranges [first, last] of cnn.order() covering every layer exactly once,
    returned in topological order."""
    order = cnn.order()
    if raw is None:
        return [Partition(f"{cnn.name}.all", cnn.name, order, "gpu")]
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{where}: {key}: expected a list of {{name, layers: [first, last], processor}}")
    pos = {n: i for i, n in enumerate(order)}
    spans: list[tuple[int, int, Partition, str]] = []
    seen: set[str] = set()
    for j, part in enumerate(raw):
        pkey = f"{key}[{j}]"
        _check_keys(part, PARTITION_KEYS, where, pkey)
        pname = _name(part, where, pkey)
        if pname in seen:
            raise InputError(f"{where}: {pkey}.name: partition {pname!r} is listed twice for CNN {cnn.name}")
        seen.add(pname)
        layers = part.get("layers")
        if not (isinstance(layers, list) and 1 <= len(layers) <= 2 and all(isinstance(x, str) for x in layers)):
            raise InputError(f"{where}: {pkey}.layers: expected [first_layer, last_layer], got {layers!r}")
        for layer in layers:
            if resolve(cnn, layer) is None:
                raise InputError(f"{where}: {pkey}.layers: layer {layer!r} is not in model {cnn.name} "
                                 f"(names: `explore info APP --layers`)")
        layers = [resolve(cnn, layer) for layer in layers]
        first, last = pos[layers[0]], pos[layers[-1]]
        if first > last:
            raise InputError(f"{where}: {pkey}.layers: {layers[0]!r} comes after {layers[-1]!r} in "
                             f"the topological order of {cnn.name}")
        proc = part.get("processor", "gpu")
        if proc not in PROCESSORS:
            raise InputError(f"{where}: {pkey}.processor: expected one of {', '.join(PROCESSORS)}, got {proc!r}")
        spans.append((first, last, Partition(f"{cnn.name}.{pname}", cnn.name, order[first:last + 1], proc), pkey))
    spans.sort(key=lambda s: s[0])
    spans = _with_inputs(spans, cnn, order)
    expect = 0
    for first, last, part, pkey in spans:
        if first < expect:
            raise InputError(f"{where}: {pkey}.layers: partition {part.name} overlaps another at layer {order[first]!r}")
        if first > expect:
            raise InputError(f"{where}: {key}: layers {order[expect]!r}..{order[first - 1]!r} of {cnn.name} "
                             f"are in no partition")
        expect = last + 1
    if expect < len(order):
        raise InputError(f"{where}: {key}: layers {order[expect]!r}..{order[-1]!r} of {cnn.name} are in no partition")
    return [s[2] for s in spans]   # in topological order


def _with_inputs(spans: list, cnn: CNN, order: list[str]) -> list:
    """A graph input no partition names joins the partition that reads it first: the one
    starting right after it in the topological order (docs/appfile.md)."""
    out, covered = [], -1
    for first, last, part, pkey in spans:
        start = first
        while start - 1 > covered and cnn.layer(order[start - 1]).op == INPUT:
            start -= 1
        if start != first:
            part = Partition(part.name, part.cnn, order[start:last + 1], part.processor)
        out.append((start, last, part, pkey))
        covered = max(covered, last)
    return out


def _pipelines(raw: Any, partitions: list[Partition], where: str) -> list[list[str]]:
    """J: the file's sets, and a singleton for every partition not named; sets ordered by
    their first partition's position in the application."""
    names = [p.name for p in partitions]
    if raw is None:
        raw = []
    if not isinstance(raw, list) or not all(isinstance(g, list) and g for g in raw):
        raise InputError(f"{where}: pipelines: expected a list of non-empty lists of partition names (cnn.partition)")
    owner: dict[str, int] = {}
    for i, group in enumerate(raw):
        for name in group:
            if name not in names:
                raise InputError(f"{where}: pipelines[{i}]: unknown partition {name!r}; expected one of {', '.join(names)}")
            if name in owner:
                raise InputError(f"{where}: pipelines[{i}]: partition {name!r} is already in pipelines[{owner[name]}]")
            owner[name] = i
    out: list[list[str]] = []
    done: set[int] = set()
    for name in names:
        if name not in owner:
            out.append([name])
        elif owner[name] not in done:
            done.add(owner[name])
            out.append(list(raw[owner[name]]))
    return out


def _schedules(raw: Any, partitions: list[Partition], cnns: dict[str, CNN], where: str) -> dict[str, list[str]]:
    """Explicit flat schedules: every entry a layer of the partition, every layer present;
    with one firing per layer the order must respect the edges."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InputError(f"{where}: schedules: expected a mapping partition -> [layer, ...]")
    parts = {p.name: p for p in partitions}
    out = {}
    for name, firings in raw.items():
        key = f"{where}: schedules.{name}"
        if name not in parts:
            raise InputError(f"{key}: unknown partition {name!r}; expected one of {', '.join(parts)}")
        layers = parts[name].layers
        if not isinstance(firings, list) or not all(isinstance(f, str) for f in firings):
            raise InputError(f"{key}: expected a list of layer names, one per firing")
        firings = [resolve(cnns[parts[name].cnn], f) or f for f in firings]
        for f in firings:
            if f not in layers:
                raise InputError(f"{key}: layer {f!r} is not in partition {name}")
        missing = [x for x in layers if x not in firings]
        if missing:
            raise InputError(f"{key}: layer {missing[0]!r} of the partition never fires")
        if len(firings) == len(layers):
            at = {x: i for i, x in enumerate(firings)}
            graph = cnns[parts[name].cnn].graph
            for u, v in graph.subgraph(layers).edges:
                if at[u] > at[v]:
                    raise InputError(f"{key}: layer {v!r} fires before its producer {u!r}")
        out[name] = list(firings)
    return out


# ---- figures --------------------------------------------------------------------------------
def _fps_value(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(str(value).strip())
        except ValueError:
            raise InputError(f"{where}: expected a throughput in frames per second (0 = none), got {value!r}") from None
    if not 0 <= value <= MAX_FPS:           # also refuses nan, inf and 10**400 written out
        raise InputError(f"{where}: throughput must be a number >= 0 and finite (at most "
                         f"{MAX_FPS:g}), got {value!r}")
    return float(value)


def fps_override(text: str, cnns: dict[str, CNN]) -> dict[str, float]:
    """--fps "71" (every CNN) or "name=71,name2=30"."""
    text = str(text).strip()
    if "=" not in text:
        value = _fps_value(text, "--fps")
        return {name: value for name in cnns}
    out = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        name = name.strip()
        if name not in cnns:
            raise InputError(f"--fps: unknown CNN {name!r}; expected one of {', '.join(cnns)}")
        if name in out:
            raise InputError(f"--fps: CNN {name!r} is given twice")
        out[name] = _fps_value(value, f"--fps {name}")
    return out


def time_limit(value: Any, where: str) -> float:
    """Seconds for the search: a number above 0 and at most a week."""
    top = SEARCH_LIMITS["time_limit"]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= top
    if not ok:
        raise InputError(f"{where}: expected seconds above 0 and up to {top}, got {value!r}")
    return float(value)


def _search(raw: Any, where: str) -> SearchSettings:
    if raw is None:
        return SearchSettings()
    fields = {"population": int, "generations": int, "crossover": float, "mutation": float,
              "seed": int, "workers": int, "relink_rounds": int, "local_rounds": int}
    _check_keys(raw, tuple(fields) + ("granularity", "time_limit", "cluster", "effort"), where, "search")
    values = {}
    choices = {"effort": EFFORTS, "granularity": GRANULARITIES}
    for k, v in raw.items():
        if k in choices:
            if v not in choices[k]:
                raise InputError(f"{where}: search.{k}: expected one of {', '.join(choices[k])}, "
                                 f"got {v!r}")
            values[k] = v
            continue
        if k == "cluster":
            if not isinstance(v, str) or not v.strip():
                raise InputError(f"{where}: search.cluster: expected a Dask scheduler address "
                                 f"such as tcp://host:8786, got {v!r}")
            values[k] = v.strip()
            continue
        if k == "time_limit":
            values[k] = time_limit(v, f"{where}: search.time_limit")
            continue
        kind = fields[k]
        ok = (isinstance(v, (int, float)) and not isinstance(v, bool) and v == v
              and (kind is float or isinstance(v, int)))
        if (not ok or v < 0 or (kind is float and v > 1) or v > SEARCH_LIMITS.get(k, v)
                or (k in ("population", "generations") and v < 1)):
            expected = ("a probability in [0, 1]" if kind is float else
                        f"a {'positive' if k in ('population', 'generations') else 'non-negative'} integer up to "
                        f"{SEARCH_LIMITS[k]}")
            raise InputError(f"{where}: search.{k}: expected {expected}, got {v!r}")
        values[k] = kind(v)
    values["fixed"] = tuple(k for k in ("population", "generations", "relink_rounds") if k in values)
    return SearchSettings(**values)

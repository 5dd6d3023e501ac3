"""Device profiles: plain YAML/JSON files that say how long a layer takes on a target.

Two kinds of entries, which may be mixed in one file (docs/throughput.md shows both):

- `processors`: a roofline model per processor (gpu, cpu, ...). A layer whole takes
  max(FLOPs / peak, bytes / bandwidth) + layer_overhead; processed by parts in Φ phases it
  takes the same with the halo re-reads added to the bytes, plus (Φ - 1) x phase_overhead.
  `activation_passes[act]` adds that many read+write passes over the output for a fused
  activation the engine actually runs unfused (the fit finds ReLU6/Clip on the TX2).
  `speedup[precision]` multiplies the compute peak (fp16 on a GPU); bytes follow the
  precision's data/parameter widths by themselves.
- `models`: measured per-layer tables {model key: {layer: {whole_ms, part_ms, phases}}} as
  `explore profile` writes them: whole_ms is the layer run whole, part_ms the time of one
  phase when run in `phases` phases; optional whole_ws_bytes / part_ws_bytes are the
  backend's measured workspace (scratch) of the layer whole / one phase, and optional
  whole_session_bytes / part_session_bytes the state its whole / part step model's session
  keeps, both of which the plan's memory counts (explorer/throughput/runtime_costs.py); optional `by_phases` {Φ: ms} is the layer's measured
  time per frame in Φ phases (parts of the granularity ladder, measured in the deployment's
  own layout and threads), interpolated between measured Φ; optional `region` {Φ: parameters
  of the by-parts region around the layer when by_phases was measured} and `alone` {Φ: ms
  with every neighbour whole} let the evaluator place a plan's layer between those two
  contexts (csdf/regions.py), and `beside_ms` is the layer whole with a neighbour
  in parts. Model keys are CNN names of the app or model names
  (zoo name or ONNX file stem). Measured entries win; layers missing from the tables fall
  back to the roofline of their processor when the file has one.

Files are read with InputError (file, key, expected) on anything malformed.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from explorer.app.yamlload import StrictLoader
from explorer.throughput.layer_times import LayerTimes, from_flat, to_flat
from sdf3.errors import InputError

FORMAT = "memtrade-profile"
VERSION = 1
BUILTIN_DIR = Path(__file__).parent / "profiles"
PRECISION_NAMES = ("fp32", "fp16", "mixed", "int8")


@dataclass
class Roofline:
    """Constants of one processor. Units chosen to read naturally in files."""
    peak_gflops: float               # fp32 compute peak actually reached, GFLOP/s
    bandwidth_gbs: float             # memory bandwidth actually reached, GB/s (1e9 B/s)
    layer_overhead_us: float = 0.0   # fixed cost of running one layer (kernel launch, sync)
    phase_overhead_us: float = 0.0   # extra cost of each phase after the first
    halo: float = 1.0                # share of halo rows re-read from memory (0 = all cached)
    speedup: dict[str, float] = field(default_factory=dict)  # precision -> peak multiplier
    # activation op -> extra memory passes over the layer's output when the engine runs it
    # unfused (each pass reads and writes the output once), e.g. {"Clip": 2.0}
    activation_passes: dict[str, float] = field(default_factory=dict)

    def peak_for(self, precision: str) -> float:
        return self.peak_gflops * self.speedup.get(precision, 1.0)


@dataclass
class DeviceProfile:
    name: str
    processors: dict[str, Roofline] = field(default_factory=dict)
    models: dict[str, dict[str, LayerTimes]] = field(default_factory=dict)
    precision: str = "fp32"          # precision the measured tables were taken at
    speedup: dict[str, float] = field(default_factory=dict)  # measured: precision -> factor
    default_phase_us: float = 0.0    # measured layers without part_ms: cost per extra phase
    meta: dict[str, Any] = field(default_factory=dict)  # device, backend, fit, notes
    # measured primitive table per CNN (explore profile --primitives; read by
    # explorer/primitives/costs.py, which checks it)
    primitives: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    @property
    def kind(self) -> str:
        return "measured" if self.models else "roofline"


# ---- reading ---------------------------------------------------------------------------

def _num(where: str, key: str, value: Any, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: key '{key}' must be a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise InputError(f"{where}: key '{key}' must be {'> 0' if positive else '>= 0'}, "
                         f"got {value}")
    return float(value)


def _mapping(where: str, key: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"{where}: key '{key}' must be a mapping, got {type(value).__name__}")
    return value


def _check_keys(where: str, data: dict, allowed: set[str]) -> None:
    unknown = sorted(set(map(str, data)) - allowed)
    if unknown:
        raise InputError(f"{where}: unknown key '{unknown[0]}' (expected one of "
                         f"{', '.join(sorted(allowed))})")


def _speedups(where: str, value: Any) -> dict[str, float]:
    table = _mapping(where, "speedup", value)
    for prec in table:
        if prec not in PRECISION_NAMES:
            raise InputError(f"{where}: speedup key '{prec}' is not a precision "
                             f"({', '.join(PRECISION_NAMES)})")
    return {p: _num(where, f"speedup.{p}", v, positive=True) for p, v in table.items()}


ROOFLINE_KEYS = {"peak_gflops", "bandwidth_gbs", "layer_overhead_us", "phase_overhead_us",
                 "halo", "speedup", "activation_passes"}


def _roofline(where: str, name: str, data: Any) -> Roofline:
    data = _mapping(where, f"processors.{name}", data)
    _check_keys(f"{where}: processors.{name}", data, ROOFLINE_KEYS)
    for key in ("peak_gflops", "bandwidth_gbs"):
        if key not in data:
            raise InputError(f"{where}: processors.{name} needs key '{key}'")
    halo = _num(where, f"processors.{name}.halo", data.get("halo", 1.0))
    if halo > 1:
        raise InputError(f"{where}: processors.{name}.halo must be within 0..1, got {halo}")
    return Roofline(
        peak_gflops=_num(where, f"processors.{name}.peak_gflops", data["peak_gflops"],
                         positive=True),
        bandwidth_gbs=_num(where, f"processors.{name}.bandwidth_gbs", data["bandwidth_gbs"],
                           positive=True),
        layer_overhead_us=_num(where, f"processors.{name}.layer_overhead_us",
                               data.get("layer_overhead_us", 0.0)),
        phase_overhead_us=_num(where, f"processors.{name}.phase_overhead_us",
                               data.get("phase_overhead_us", 0.0)),
        halo=halo,
        speedup=_speedups(f"{where}: processors.{name}", data.get("speedup", {})),
        activation_passes={
            str(act): _num(where, f"processors.{name}.activation_passes.{act}", v)
            for act, v in _mapping(where, f"processors.{name}.activation_passes",
                                   data.get("activation_passes", {})).items()},
    )


def _layer_times(where: str, key: str, data: Any) -> LayerTimes:
    data = _mapping(where, key, data)
    _check_keys(f"{where}: {key}", data, {"whole_ms", "part_ms", "phases",
                                          "whole_ws_bytes", "part_ws_bytes", "by_phases",
                                          "whole_session_bytes", "part_session_bytes",
                                          "region", "alone", "beside_ms",
                                          "band_session_bytes", "band_ws_bytes",
                                          "alone_session_bytes", "alone_ws_bytes",
                                          "beside_session_bytes", "beside_ws_bytes",
                                          "call_bytes"})
    if "whole_ms" not in data:
        raise InputError(f"{where}: {key} needs key 'whole_ms'")
    part = data.get("part_ms")
    phases = data.get("phases")
    if (part is None) != (phases is None):
        raise InputError(f"{where}: {key} needs both 'part_ms' and 'phases', or neither")
    if phases is not None and (isinstance(phases, bool) or not isinstance(phases, int)
                               or phases < 1):
        raise InputError(f"{where}: {key}.phases must be an integer >= 1, got {phases!r}")
    optional: dict[str, Any] = {k: int(_num(where, f"{key}.{k}", data[k]))
                                for k in ("whole_ws_bytes", "part_ws_bytes",
                                          "whole_session_bytes", "part_session_bytes",
                                          "call_bytes")
                                if data.get(k) is not None}
    for k in ("beside_session_bytes", "beside_ws_bytes"):      # a number, or {side: number}
        if isinstance(data.get(k), dict):
            optional[k] = {str(side): int(_num(where, f"{key}.{k}.{side}", v))
                           for side, v in data[k].items()}
            if not set(optional[k]) <= {"in", "out", "both"}:
                raise InputError(f"{where}: {key}.{k}: sides must be in, out or both, got "
                                 f"{sorted(optional[k])}")
        elif data.get(k) is not None:
            optional[k] = int(_num(where, f"{key}.{k}", data[k]))
    if data.get("beside_ms") is not None:
        optional["beside_ms"] = _num(where, f"{key}.beside_ms", data["beside_ms"])
    by = {name: _by_phases(where, f"{key}.{name}", data.get(name, {}))
          for name in ("by_phases", "region", "alone", "band_session_bytes", "band_ws_bytes",
                       "alone_session_bytes", "alone_ws_bytes")}
    if by["alone"] and set(by["region"]) != set(by["by_phases"]):
        raise InputError(f"{where}: {key}.region needs the phase counts of {key}.by_phases "
                         f"({sorted(by['by_phases'])}), got {sorted(by['region'])}")
    return from_flat(_num(where, f"{key}.whole_ms", data["whole_ms"]),
                     part_ms=None if part is None else _num(where, f"{key}.part_ms", part),
                     phases=phases, **optional, **by)


def _by_phases(where: str, key: str, data: Any) -> dict[int, float]:
    """{Φ: number} with every Φ an integer >= 2."""
    out = {}
    for n, value in _mapping(where, key, data).items():
        try:
            count = int(n)
        except (TypeError, ValueError):
            count = 0
        if count < 2 or str(n).strip() != str(count):
            raise InputError(f"{where}: {key}: key {n!r} must be a phase count >= 2")
        out[count] = _num(where, f"{key}.{n}", value)
    return out


TOP_KEYS = {"format", "version", "name", "processors", "models", "precision", "speedup",
            "default_phase_us", "meta", "primitives"}


def profile_from_dict(data: Any, where: str = "<profile>") -> DeviceProfile:
    """Validate a parsed profile file; `where` names the file in error messages."""
    data = _mapping(where, "<top level>", data)
    _check_keys(where, data, TOP_KEYS)
    if data.get("format", FORMAT) != FORMAT:
        raise InputError(f"{where}: key 'format' must be '{FORMAT}', got {data['format']!r}")
    if data.get("version", VERSION) != VERSION:
        raise InputError(f"{where}: key 'version' must be {VERSION}, got {data['version']!r}")
    procs = {str(n): _roofline(where, str(n), v)
             for n, v in _mapping(where, "processors", data.get("processors", {})).items()}
    models: dict[str, dict[str, LayerTimes]] = {}
    for model, table in _mapping(where, "models", data.get("models", {})).items():
        table = _mapping(where, f"models.{model}", table)
        models[str(model)] = {str(layer): _layer_times(where, f"models.{model}.{layer}", t)
                              for layer, t in table.items()}
    if not procs and not models:
        raise InputError(f"{where}: a profile needs 'processors' (roofline constants) "
                         "or 'models' (measured layer times)")
    precision = data.get("precision", "fp32")
    if precision not in PRECISION_NAMES:
        raise InputError(f"{where}: key 'precision' must be one of "
                         f"{', '.join(PRECISION_NAMES)}, got {precision!r}")
    return DeviceProfile(
        name=str(data.get("name", Path(where).stem)),
        processors=procs, models=models, precision=precision,
        speedup=_speedups(where, data.get("speedup", {})),
        default_phase_us=_num(where, "default_phase_us", data.get("default_phase_us", 0.0)),
        meta=dict(_mapping(where, "meta", data.get("meta", {}))),
        primitives=dict(_mapping(where, "primitives", data.get("primitives", {}))),
    )


def load_profile(path: str | Path) -> DeviceProfile:
    """Read a profile file (.yaml, .yml or .json)."""
    from explorer.app.input_file import regular_file
    path = regular_file(path, "a device profile file")
    try:
        text = path.read_text()
        data = (json.loads(text) if path.suffix == ".json"
                else yaml.load(text, Loader=StrictLoader))  # noqa: S506 (SafeLoader, strict)
    except (yaml.YAMLError, json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        line = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(f"{path}: not a valid YAML/JSON profile ({line})") from None
    profile = profile_from_dict(data, str(path))
    profile.path = path
    return profile


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml"))


def builtin_profile(name: str) -> DeviceProfile:
    path = BUILTIN_DIR / f"{name}.yaml"
    if not path.is_file():
        raise InputError(f"unknown device profile '{name}' (built-in: "
                         f"{', '.join(builtin_names()) or 'none'}; or give a file path)")
    return load_profile(path)


def resolve_profile(spec: str, base: Path | None = None) -> DeviceProfile:
    """A built-in name, or a path (relative to `base`, the app file's folder)."""
    if spec in builtin_names():
        return builtin_profile(spec)
    path = Path(spec)
    if not path.is_absolute() and base is not None:
        path = base / path
    if path.suffix.lower() in (".yaml", ".yml", ".json") or path.exists():
        return load_profile(path)
    return builtin_profile(spec)


# ---- writing ---------------------------------------------------------------------------

def _clean(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None and not (isinstance(v, dict) and not v)}


def profile_to_dict(profile: DeviceProfile) -> dict[str, Any]:
    data: dict[str, Any] = {"format": FORMAT, "version": VERSION, "name": profile.name}
    if profile.meta:
        data["meta"] = profile.meta
    if profile.processors:
        data["processors"] = {n: asdict(r) for n, r in profile.processors.items()}
    if profile.models:
        data["precision"] = profile.precision
        if profile.speedup:
            data["speedup"] = dict(profile.speedup)
        if profile.default_phase_us:
            data["default_phase_us"] = profile.default_phase_us
        data["models"] = {m: {layer: _clean(to_flat(t)) for layer, t in table.items()}
                          for m, table in profile.models.items()}
    if profile.primitives:
        data["primitives"] = profile.primitives
    return data


def save_profile(profile: DeviceProfile, path: str | Path) -> Path:
    """Write a profile; JSON when the name ends in .json, YAML otherwise."""
    path = Path(path)
    data = profile_to_dict(profile)
    if path.suffix == ".json":
        path.write_text(json.dumps(data, indent=1) + "\n")
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path

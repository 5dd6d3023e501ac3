"""Throughput evaluation: phases per layer -> frames per second per CNN.

One small interface for the search: `make_evaluator(app, spec).fps(phases)`. The rules
(DESIGN.md, "Throughput during the search"):
- a layer's time comes from the device profile, whole (Φ = 1) or by parts (Φ phases), by
  parts placed by the weights its by-parts region cycles through, whole ones beside parts
  at their time there, when the profile measured those contexts (csdf/regions.py);
- a partition's frame time is the sum of its layers' times on its processor;
- a pipeline set of J runs its partitions in parallel, one stage each; stages on the same
  processor share it, so a set's period is the largest per-processor sum of its stages;
- sets of J never run together, so a CNN's frame time is the sum of the periods of the sets
  holding its partitions (a multi-CNN app with one CNN per frame times each CNN alone);
- fps = 1000 / frame time in ms.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from csdf.model import CNN
from explorer.app.model import Application, Precision
from explorer.throughput.costs import VIEW_OPS, LayerCost, cnn_costs
from explorer.throughput.device_profile import DeviceProfile, LayerTimes, Roofline, resolve_profile
from csdf.regions import beside_parts, region_params, region_sizes
from sdf3.errors import InputError

Phases = dict[str, dict[str, int]]
FUSED = 1 << 62      # the region of a layer run fused: at least any ladder's (LayerTimes.ms_in)


def roofline_ms(cost: LayerCost, roof: Roofline, precision: str, data_bytes: int,
                par_bytes: int, phases: int = 1) -> float:
    """One layer's time on a roofline processor, in milliseconds."""
    if cost.in_elems == 0 and cost.out_elems == 0 and cost.flops == 0:
        return 0.0          # a view (Input, Flatten, Reshape): no kernel runs
    halo = roof.halo * cost.halo_elems(phases) * data_bytes
    passes = sum(roof.activation_passes.get(act, 0.0) for act in cost.activations)
    moved = cost.bytes(data_bytes, par_bytes) + halo + passes * 2 * cost.out_elems * data_bytes
    compute_s = cost.flops / (roof.peak_for(precision) * 1e9)
    memory_s = moved / (roof.bandwidth_gbs * 1e9)
    overhead_us = roof.layer_overhead_us + max(0, phases - 1) * roof.phase_overhead_us
    return max(compute_s, memory_s) * 1e3 + overhead_us * 1e-3


def model_keys(cnn: CNN) -> list[str]:
    """Names a measured table may be filed under: the CNN's name, then its model's name."""
    keys = [cnn.name]
    if cnn.source:
        stem = Path(str(cnn.source)).stem
        keys += [stem, str(cnn.source)]
    return keys


@dataclass
class Evaluator:
    """Times layers with a device profile and combines them by the app's partitions and J."""
    app: Application
    profile: DeviceProfile
    name: str = "profile"
    # precision: auto: the profiles measured at the other precisions a layer may take
    # ({precision name: DeviceProfile}, `platform: cpu`): a layer at one of them is timed,
    # and its workspace and sessions counted, from that precision's table
    at_precision: Mapping[str, DeviceProfile] = field(default_factory=dict)
    _costs: dict[str, dict[str, LayerCost]] = field(default_factory=dict, repr=False)
    _tables: dict[str, dict[str, LayerTimes]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._costs = {n: cnn_costs(c) for n, c in self.app.cnns.items()}
        self._tables = _app_tables(self.app, self.profile)
        self._by_precision = {p: _app_tables(self.app, prof) for p, prof in self.at_precision.items()}
        self._loop = {name: loop_factor(self.profile, cnn) for name, cnn in self.app.cnns.items()}
        # CNNs whose table measured the contexts too: regions count (csdf.regions)
        self._params = {name: {n: cnn.layer(n).param_count for n in cnn.order()}
                        for name, cnn in self.app.cnns.items()
                        if any(t.alone or t.beside_ms is not None
                               for t in self._tables.get(name, {}).values())}
        # a profile that timed region steps (`explore profile --steps regions`): a layer that
        # shares its region with others runs fused in bands, as in the ladder (share 1)
        self._fused = self.profile.meta.get("steps") == "regions"
        self._memo: dict[tuple, float] = {}
        for part in self.app.partitions:        # check now, not in the middle of a search
            for layer in part.layers:
                self.layer_time(part.cnn, layer, 1, part.processor)

    def tables_for(self, layers) -> Mapping[str, Mapping[str, LayerTimes]]:
        """`tables` with each layer's row from the table measured at its precision in
        `layers` (explorer.app.layer_precision.LayerPrecisions) where one was (`at_precision`),
        so that its workspace and session bytes are those of its own steps."""
        if not self._by_precision or layers is None:
            return self.tables
        out = {}
        for cnn, table in self._tables.items():
            own = {l: self._by_precision.get(layers.name(cnn, l), {}).get(cnn, {}).get(l, t)
                   for l, t in table.items()}
            out[cnn] = own
        return MappingProxyType(out)

    @property
    def tables(self) -> Mapping[str, Mapping[str, LayerTimes]]:
        """The measured per-layer tables the profile holds for the app's CNNs, by CNN name
        (the app's name, found under any of `model_keys`), then layer; read-only. A CNN the
        profile did not measure is absent (its layers are timed by the roofline). Their
        workspace and session bytes enter the memory (explorer/throughput/runtime_costs.py)
        and their by-phases times cost a fused tile's extra calls (explorer/tiling/fused.py)."""
        return MappingProxyType(self._tables)

    def layer_time(self, cnn: str, layer: str, phases: int, processor: str,
                   region: int | None = None, beside: bool = False,
                   precision: Precision | None = None) -> float:
        """`layer_ms`, remembered by its arguments: a search asks the same layers again and
        again (explorer/tiling/fused.py prices tiled groups by it too)."""
        key = (cnn, layer, phases, processor, region, beside, precision)
        ms = self._memo.get(key)
        if ms is None:
            ms = self._memo[key] = self.layer_ms(cnn, layer, phases, processor, region, beside,
                                                 precision)
        return ms

    def layer_ms(self, cnn: str, layer: str, phases: int = 1, processor: str = "gpu",
                 region: int | None = None, beside: bool = False,
                 precision: Precision | None = None) -> float:
        """Time of one layer in `phases` phases (1 = whole) on `processor`, milliseconds;
        `region`: parameters of its by-parts region (csdf/regions.py; None: the
        context the profile measured by_phases in); `beside`: whole with a neighbour in
        parts (csdf.regions.beside_parts); `precision`: the layer's own (precision: auto),
        else the app's: a measured time scaled by the profile's speedup at it, the roofline
        moving every byte of the layer at its widths."""
        prof, app = self.profile, self.app
        p = precision or app.precision
        table = self._tables.get(cnn)
        measured = self._by_precision.get(p.name, {}).get(cnn)
        if measured is not None and layer in measured:      # measured at its own precision
            table, speed = measured, 1.0
        elif table is not None and layer in table:
            speed = prof.speedup.get(p.name, 1.0) if p.name != prof.precision else 1.0
        if table is not None and layer in table:
            times, slope = table[layer], prof.default_phase_us * 1e-3
            monotone = prof.meta.get("steps") != "regions"    # LayerTimes.ms says why
            if region is not None or beside:
                own = self._params[cnn][layer]
                return times.ms_in(phases, region or 0, own, slope, beside, monotone) / speed
            return times.ms(phases, slope, monotone) / speed
        roof = prof.processors.get(processor)
        if roof is None:
            op = self.app.cnns[cnn].layer(layer).op
            if op in VIEW_OPS:
                return 0.0
            where = f"device profile {prof.name}"
            if table is None and not prof.processors:
                raise InputError(f"{where}: no measured times for CNN '{cnn}' (keys tried: "
                                 f"{', '.join(model_keys(self.app.cnns[cnn]))})")
            if table is not None and not prof.processors:
                raise InputError(f"{where}: no measured time for layer '{layer}' of '{cnn}'")
            raise InputError(f"{where}: no constants for processor '{processor}' "
                             f"(has {', '.join(prof.processors)})")
        return roofline_ms(self._costs[cnn][layer], roof, p.name, p.data_bytes, p.par_bytes,
                           phases)

    def partition_ms(self, partition: str, phases: Phases | None = None, layers=None) -> float:
        """Frame time of one partition: the sum of its layers' times (each at its precision in
        `layers`, explorer.app.layer_precision.LayerPrecisions, when given)."""
        part = self.app.partition(partition)
        ph = {n: max(1, int(v)) for n, v in (phases or {}).get(part.cnn, {}).items()}
        params = self._params.get(part.cnn)
        regions, beside = {}, set()
        if params is not None:
            edges = self.app.cnns[part.cnn].edges()
            regions = region_params(part.layers, edges, ph, params)
            if self._fused:
                sizes = region_sizes(part.layers, edges, ph)
                regions = {n: FUSED if sizes[n] > 1 else r for n, r in regions.items()}
            beside = beside_parts(part.layers, edges, ph)
        return self._loop[part.cnn] * sum(
            self.layer_time(part.cnn, layer, ph.get(layer, 1), part.processor,
                            regions.get(layer), layer in beside,
                            None if layers is None else layers.layer(part.cnn, layer))
            for layer in part.layers)

    def busiest(self, group: list[str], times: dict[str, float]) -> tuple[str, list[str], float]:
        """(processor, its stages in the pipeline set `group`, their summed time): stages on
        one processor share it, so the busiest processor sets the set's period."""
        per_proc: dict[str, list[str]] = {}
        for name in group:
            per_proc.setdefault(self.app.partition(name).processor, []).append(name)
        if not per_proc:
            return "", [], 0.0
        proc, names = max(per_proc.items(), key=lambda kv: sum(times[n] for n in kv[1]))
        return proc, names, sum(times[n] for n in names)

    def set_period_ms(self, group: list[str], times: dict[str, float]) -> float:
        """Period of one pipeline set: its busiest processor's time."""
        return self.busiest(group, times)[2]

    def pipeline_sets(self) -> list[list[str]]:
        """The sets of J, and every partition J does not list as a set of its own."""
        groups = self.app.pipelines or [[p.name] for p in self.app.partitions]
        seen = {name for g in groups for name in g}
        return list(groups) + [[p.name] for p in self.app.partitions if p.name not in seen]

    def frame_ms(self, phases: Phases | None = None, layers=None) -> dict[str, float]:
        """Each CNN's time per frame, milliseconds (`layers`: each layer's precision)."""
        times = {p.name: self.partition_ms(p.name, phases, layers) for p in self.app.partitions}
        frame = {cnn: 0.0 for cnn in self.app.cnns}
        for group in self.pipeline_sets():
            period = self.set_period_ms(group, times)
            for cnn in {self.app.partition(n).cnn for n in group}:
                frame[cnn] += period
        return frame

    def fps(self, phases: Phases | None = None, layers=None) -> dict[str, float]:
        """Frames per second of each CNN for `phases` ({cnn: {layer: Φ}}, missing = 1), each
        layer at its precision in `layers` (explorer.app.layer_precision.LayerPrecisions;
        None: the app's)."""
        return {cnn: (1000.0 / ms if ms > 0 else float("inf"))
                for cnn, ms in self.frame_ms(phases, layers).items()}


def loop_factor(profile: DeviceProfile, cnn: CNN) -> float:
    """What a frame takes over the sum of its layers' times in `explore profile`'s ladder
    deployments of `cnn` (meta.ladder_runs: each run's median frame, run as explore run
    runs it, over its layers' summed medians; the median over runs): the executor's loop
    between calls, which no layer's time contains. 1 without such runs (roofline profiles,
    older files). Measured on MobileNetV2, one thread: 1.004-1.026 over 8 runs."""
    runs = []
    for key in model_keys(cnn):
        runs = (profile.meta.get("ladder_runs") or {}).get(key) or []
        if runs:
            break
    ratios = sorted(float(r["frame_ms"]) / float(r["layers_ms"]) for r in runs
                    if float(r.get("layers_ms") or 0) > 0 and float(r.get("frame_ms") or 0) > 0)
    if not ratios:
        return 1.0
    mid = len(ratios) // 2
    return ratios[mid] if len(ratios) % 2 else 0.5 * (ratios[mid - 1] + ratios[mid])


EVALUATORS = ("profile", "measured")


def _app_tables(app: Application, profile: DeviceProfile) -> dict[str, dict[str, LayerTimes]]:
    """The measured per-layer table of each of the app's CNNs in `profile` (by `model_keys`)."""
    out = {}
    for name, cnn in app.cnns.items():
        for key in model_keys(cnn):
            if key in profile.models:
                out[name] = profile.models[key]
                break
    return out


def make_evaluator(app: Application, spec: str | None = None,
                   measured: DeviceProfile | None = None,
                   at_precision: Mapping[str, DeviceProfile] | None = None) -> Evaluator:
    """The evaluator named by `spec`: None or "profile" (the app's platform profile),
    "measured" (the app's platform must be a measured profile file), a built-in profile
    name (e.g. "jetson-tx2"), or a path to a profile file. `measured`: the profile of
    `platform: cpu`, measured on this machine (memtrade/platform.py); `at_precision`: with
    precision: auto, this machine's profiles at the other precisions a layer may take."""
    base = Path(app.path).parent if app.path else None
    platform = app.platform or "jetson-tx2"
    if platform == "cpu" and spec in (None, "", "profile", "measured"):
        if measured is None:
            raise InputError("platform cpu: this machine's times are measured by "
                             "`explore APP.yaml`; give --evaluator a profile here")
        return Evaluator(app, measured, "cpu", dict(at_precision or {}))
    if spec in (None, "", "profile"):
        return Evaluator(app, resolve_profile(platform, base), "profile")
    if spec == "measured":
        profile = resolve_profile(platform, base)
        if profile.kind != "measured":
            raise InputError(f"--evaluator measured: platform '{platform}' is not a measured "
                             "profile; give the file written by `explore profile`")
        return Evaluator(app, profile, "measured")
    return Evaluator(app, resolve_profile(spec, Path.cwd()), spec)

"""Per-layer times at every rung of the granularity ladder, measured inside real deployments.

A layer's time depends on how its neighbours store their tensors (ORT's blocked NCHWc
layout between whole layers, rows rings around parts) and on the thread pool, so timing a
layer alone in another layout mispredicts a deployment (a profile summing to
131 fps for a plan measured at 239-250). Here every layer is timed where it runs: for the
whole CNN (reuse only) and for every k of the ladder (explorer.plan.genes) the CNN is deployed
with every layer in parts of k rows (`csdf.parts.phases_for_rows`), run with the layout and
thread count `explore run` uses (in a child process, with ORT's one shared thread pool),
and every prebound call timed; a layer's time per frame at
Φ = ceil(H / k) phases is the median over frames of the sum of its calls (the median: a
shared machine's preemptions fall on some frames, not on every one). The evaluator
interpolates between the measured Φ (explorer/throughput/device_profile.py, `by_phases`).
"""
from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from csdf.model import CNN
from csdf.parts import phases_for_rows
from explorer.plan.model import Plan
from deploy.profile.ladder_records import LadderTimes, StepTimes
from deploy.runtime.child import child_env
from deploy.runtime.manifest_records import Step


def ladder_rows(cnn: CNN) -> list[int]:
    """Rows per phase k measured: 1, 2, 4, ... below the tallest height of a layer that
    may go by parts (explorer.plan.genes' ladder rungs are these k, balanced)."""
    from csdf.parts import can_split
    tallest = max([int(cnn.layer(n).output_shape[2]) for n in cnn.order()
                   if can_split(cnn.layer(n))], default=1)
    ks, k = [], 1
    while k < tallest:
        ks.append(k)
        k *= 2
    return ks


def cnn_plan(cnn: CNN, phases: dict[str, int], precision: str) -> Plan:
    """The plan of `cnn` alone, one partition, under `phases` (as `explore` derives it)."""
    from explorer.app.model import PRECISIONS, Application, Partition
    from explorer.plan.derive import derive, plan_for
    app = Application(cnn.name, {cnn.name: cnn}, [Partition(f"{cnn.name}.all", cnn.name, cnn.order())],
                      [[f"{cnn.name}.all"]], PRECISIONS[precision])
    d = derive(app, {cnn.name: phases})
    return plan_for(app, d, {cnn.name: 0.0}, True)


def step_times(deploy_dir: Path, cnn: str, frames: int, threads: int, layout: str,
               warmup: int = 3, keep: Path | None = None, whole: bool = False) -> StepTimes:
    """One deployment of `cnn` timed as `explore run` runs it: ms per frame by layer, ms per
    frame, calls per frame, and the heap one call's ONNX Runtime binding keeps, averaged
    (where glibc reports the heap): 2.0-2.4 KiB measured on MobileNetV2 and YOLOv2-16 (1.5
    MiB for YOLOv2-16's 655 region steps), 4-6 KiB for a band model's dozen ports. With
    `keep` (a folder), also the probes: the workspace probe's jobs of its step models in
    the forms it runs them (every step model with `whole`, else the by-parts ones:
    deploy/profile/deployed_forms.py), each with the heap its session kept here (`held`).

    A layer's ms is the median over frames of the sum of its calls' times in that frame.
    `frame_ms` is the median of frames run exactly as Executor.run_stream runs them (no
    timer between calls), interleaved with the timed frames, so the loop's own cost per
    call shows as frame_ms minus the layers' sum. Medians, not means: the profile must
    give a quiet machine's times on a shared one. Measured (MobileNetV2 whole,
    load 3-10 from other processes): per-layer medians summed to 8.3-8.8 ms in every run
    while the frames' means ranged 9.5-27 ms; the frames of a quiet run take 8.3-8.7 ms."""
    from deploy.ort.backend import OrtBackend
    from deploy.ort.process import init_runtime
    from deploy.runtime import executor, manifest as mf

    manifest = mf.load(deploy_dir)
    init_runtime(threads, True)
    be = OrtBackend(manifest.dtype, threads, True, layout)
    be.bind_heap = [0, 0]
    keeper = None
    if keep is not None:
        from deploy.profile.deployed_forms import FormKeeper
        be.on_session = keeper = FormKeeper(keep)
        be.session_heap = {}
    ex = executor.Executor(manifest, deploy_dir, be)
    be.on_session = None
    run = ex.cnns[cnn]
    steps = [(time_shares(step), i, part) for part, mpart in
             zip(run.partitions, [p for p in manifest.partitions if p.cnn == cnn])
             for i, step in enumerate(mpart.steps)]
    layers = sorted({name for shares, _, _ in steps for name in shares})
    rng = np.random.default_rng(0)
    shape = manifest.cnns[cnn].inputs[0].shape
    data = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
    per_frame: dict[str, list[float]] = {name: [] for name in layers}
    plain: list[float] = []
    for f in range(warmup + 2 * frames):
        executor.set_frame(data[f % len(data)])
        parity = f % 2
        if f >= warmup and (f - warmup) % 2:      # a frame as run_stream runs it
            start = time.perf_counter()
            for part in run.partitions:
                for call in part.calls[parity]:
                    call()
            plain.append(time.perf_counter() - start)
            continue
        acc = dict.fromkeys(layers, 0.0)
        for shares, i, part in steps:
            call = part.calls[parity][i]
            start = time.perf_counter()
            call()
            took = time.perf_counter() - start
            for name, share in shares.items():
                acc[name] += took * share
        if f >= warmup:
            for name, t in acc.items():
                per_frame[name].append(t)
    probes: list = []
    if keeper is not None:
        from deploy.profile.deployed_forms import deployed_jobs
        probes = deployed_jobs(be, keeper, manifest, Path(deploy_dir), whole, max(1, threads))
    return StepTimes({name: float(np.median(ts)) * 1e3 for name, ts in per_frame.items()},
                     float(np.median(plain)) * 1e3, len(steps),
                     be.bind_heap[0] / be.bind_heap[1] if be.bind_heap[1] else None, tuple(probes))


def time_shares(step: Step) -> dict[str, float]:
    """Which layers a step's time belongs to: its layer, or for a region step (a band of
    firings, deploy/build/regions.py) each firing's layer by its share of the band's work
    (the step's `work`, multiply-adds or outputs per firing). One call's time cannot be
    split by measurement; the band's sum is what the evaluator adds up again."""
    if not step.region:
        return {step.layer: 1.0}
    work: dict[str, float] = {}
    for (layer, _), w in zip(step.region, step.work or ()):
        work[layer] = work.get(layer, 0.0) + w
    total = sum(work.values()) or 1.0
    return {layer: v / total for layer, v in work.items()}


def step_times_in_child(deploy_dir: Path, cnn: str, frames: int, threads: int,
                         layout: str, keep: Path | None = None, whole: bool = False) -> StepTimes:
    """step_times in a process of its own, as `explore run` runs: ONNX Runtime's one
    process-wide thread pool (which a process cannot share with per-session pools)."""
    import json
    import subprocess
    import sys
    extra = [str(keep), "whole" if whole else "parts"] if keep is not None else []
    done = subprocess.run([sys.executable, "-m", "deploy.profile.ladder", str(deploy_dir), cnn,
                           str(frames), str(threads), layout, *extra],
                          capture_output=True, text=True, env=child_env(), check=False)
    if done.returncode != 0:
        raise RuntimeError(f"timing {deploy_dir} failed: {done.stderr.strip()[-2000:]}")
    return StepTimes.from_json(json.loads(done.stdout.strip().splitlines()[-1]))


def profile_ladder(cnn: CNN, precision: str = "fp32", frames: int = 10, threads: int = 0,
                   layout: str = "blocked", progress=None,
                   runs_out: list | None = None, rounds: int = 1,
                   regions: bool = False, live=None, scales=None) -> dict[str, LadderTimes]:
    """Every layer's `LadderTimes`, measured in deployments of `cnn` whole and in parts of
    every k of `ladder_rows`. `runs_out` (a list) receives one
    {"rows", "layers_ms", "frame_ms", "calls"} per deployment (rows 0 = whole): what the
    frames took beside the layers' sum.

    `rounds` > 1 times every deployment that many times, round after round (each round
    all deployments, so a busy minute on a shared machine hits one round of each, not all
    rounds of one), and keeps per layer the least of its rounds' medians, per deployment
    the least frame and layers' sum: contention from other processes only ever adds time,
    so the least is the closest to a quiet machine (the benchmark measures plans the same
    way, benchmarks/granularity.py). `regions`: deployed as `explore deploy --steps regions`
    deploys (a band's time shared among its layers, `time_shares`), else one step per firing.
    `live(text)` hears of every deployment as it is written and as it is timed. `scales`: an
    int8 profile's (deploy/profile/app_profile.py `timing_scales`)."""
    with tempfile.TemporaryDirectory() as tmp:
        ladder = Ladder(cnn, Path(tmp), precision, frames, threads, layout, regions, live, scales)
        for _ in range(max(1, rounds)):
            ladder.time_round(live)
        return ladder.table(runs_out, progress)


def alone_groups(cnn: CNN, phases: dict[str, int]) -> list[list[str]]:
    """The layers in Φ > 1 phases split into groups with no edge inside a group (a greedy
    colouring of the undirected layer graph, networkx's largest-first): deployed one group
    in parts and the rest whole, every layer is timed in parts with all neighbours whole."""
    import networkx as nx
    split = [n for n in cnn.order() if phases[n] > 1]
    colour = nx.greedy_color(nx.Graph(cnn.graph.subgraph(split)), strategy="largest_first")
    groups: list[list[str]] = [[] for _ in range(max(colour.values(), default=-1) + 1)]
    for n in split:
        groups[colour[n]].append(n)
    return groups


class Ladder:
    """The ladder's deployments of one CNN (whole, every layer in parts of each k of
    `ladder_rows`, and for each k the `alone_groups` in parts one group at a time), written
    once into `folder` and timed round by round, so a caller can interleave its own
    measurements between rounds (benchmarks/granularity.py)."""

    def __init__(self, cnn: CNN, folder: Path, precision: str = "fp32", frames: int = 10,
                 threads: int = 0, layout: str = "blocked", regions: bool = False,
                 live=None, scales=None):
        from deploy.build.derive import derive as deploy_plan
        self.cnn, self.frames, self.threads, self.layout = cnn, frames, threads, layout
        # (label, k, group): group None = every layer at k (k None: whole)
        self.runs: list[tuple[str, int | None, int | None]] = [("whole", None, None)]
        every: list[dict[str, int]] = [{n: 1 for n in cnn.order()}]
        for k in ladder_rows(cnn):
            phases = phases_for_rows(cnn, {n: k for n in cnn.order()})
            self.runs.append((f"k={k}", k, None))
            every.append(phases)
            for g, group in enumerate(alone_groups(cnn, phases)):
                self.runs.append((f"k={k} alone {g}", k, g))
                every.append({n: (phases[n] if n in group else 1) for n in cnn.order()})
        self.folders: list[tuple[Path, dict[str, int]]] = []
        # each whole layer in a step of its own, not in chain steps (deploy/build/chains.py):
        # a chain's one call cannot be split into its layers' workspaces, and the probe's
        # peak for the call, which every member would take as its own, was 4.5 MiB for each
        # layer of int8 MobileNetV2's first chain against 0.06-1.3 MiB for the layers
        # alone. So the plan counts a chained layer as its own step: more session state
        # (~50 KiB against ~26) and calls than the chain holds and makes.
        for i, phases in enumerate(every):
            out = Path(folder) / f"run{i}"
            deploy_plan(cnn_plan(cnn, phases, precision), {cnn.name: cnn}, out, regions=regions,
                        scales=scales, chains=False)
            self.folders.append((out, phases))
            if live:
                live(f"deployed {self.runs[i][0]} ({i + 1} of {len(every)})")
        # per deployment: what its step models hold as it runs them, per layer (bands.py):
        # every step of the whole deployment, the by-parts steps of the others (regions)
        self.probe = [k is None or regions for _, k, _ in self.runs]
        self.bands: list[dict[str, tuple[int, int]]] = [{} for _ in self.runs]
        self.best: list[StepTimes | None] = [None] * len(self.runs)

    def time_round(self, live=None) -> None:
        """Time every deployment once more; keep each layer's least median. The first round
        also keeps the step models' forms and measures what they hold (`bands`). `live(text)`
        hears of each deployment timed."""
        import shutil
        from deploy.profile.bands import band_bytes
        for i, (out, _) in enumerate(self.folders):
            first = self.best[i] is None
            keep = out.with_name(out.name + "-forms") if first and self.probe[i] else None
            timed = step_times_in_child(out, self.cnn.name, self.frames, self.threads,
                                         self.layout, keep, self.runs[i][1] is None)
            if keep is not None:
                self.bands[i] = band_bytes(list(timed.probes))
                shutil.rmtree(keep, ignore_errors=True)
            timed = replace(timed, probes=())
            if live:
                live(f"timed {self.runs[i][0]} ({i + 1} of {len(self.folders)}): "
                     f"{timed.frame_ms:.2f} ms/frame")
            b = self.best[i]
            if b is None:
                self.best[i] = timed
                continue
            self.best[i] = replace(b, layers={n: min(ms, timed.layers[n]) for n, ms in b.layers.items()},
                                   frame_ms=min(b.frame_ms, timed.frame_ms))

    def table(self, runs_out: list | None = None, progress=None) -> dict[str, LadderTimes]:
        """Every layer's `LadderTimes` from the rounds timed so far (see profile_ladder;
        csdf/regions.py says why regions and neighbours in parts matter)."""
        from csdf.regions import beside_parts, region_params, ring_side
        cnn = self.cnn
        beside: dict[str, list[float]] = {}
        params = {n: cnn.layer(n).param_count for n in cnn.order()}
        table: dict[str, LadderTimes] = {}
        for (label, k, group), (_, phases), timed, bands in zip(self.runs, self.folders, self.best,
                                                                self.bands):
            if timed is None:
                raise RuntimeError("Ladder.table before any round was timed")
            times = timed.layers
            if runs_out is not None:
                runs_out.append({"rows": k or 0, "layers_ms": round(sum(times.values()), 4),
                                 "frame_ms": round(timed.frame_ms, 4), "calls": timed.calls,
                                 **({} if group is None else {"alone": group})})
            regions = region_params(cnn.order(), cnn.edges(), phases, params)
            near = beside_parts(cnn.order(), cnn.edges(), phases)
            for name, ms in times.items():
                entry = table.setdefault(name, LadderTimes())
                phi = phases[name]
                if phi == 1:
                    if k is None:
                        entry = replace(entry, whole_ms=ms)
                    elif name in near:
                        beside.setdefault(name, []).append(ms)
                elif group is None:
                    if phi not in entry.by_phases:
                        entry.by_phases[phi] = ms
                        entry.region[phi] = regions[name]
                else:
                    entry.alone.setdefault(phi, ms)
                if name in bands:
                    side = ring_side(cnn.graph, name, phases) if k is not None and phi == 1 else ""
                    entry = _held(entry, bands[name], k is None, phi, group is None, side)
                table[name] = entry
            if progress:
                progress(label, sum(times.values()))
        per_call = [t.call_bytes for t in self.best if t and t.call_bytes is not None]
        for name, entry in table.items():
            # what each call's binding holds (step_times)
            table[name] = replace(entry, beside_ms=float(np.median(beside[name]))
                                  if name in beside else None,
                                  call_bytes=int(round(float(np.median(per_call))))
                                  if per_call else None)
        return table


def _held(entry: LadderTimes, held: tuple[int, int], whole: bool, phi: int, band: bool,
          side: str) -> LadderTimes:
    """`entry` with the (session state, workspace) its step models held in one deployment:
    whole as deployed (`whole`), by parts in Φ = `phi` phases in the bands (`band`) or
    alone, or whole beside parts (the most, per ring `side`)."""
    state, ws = held
    if whole:
        return replace(entry, whole_session_bytes=state, whole_ws_bytes=ws)
    if phi > 1:
        if band:
            return replace(entry, band_session_bytes={**entry.band_session_bytes, phi: state},
                           band_ws_bytes={**entry.band_ws_bytes, phi: ws})
        return replace(entry, alone_session_bytes={**entry.alone_session_bytes, phi: state},
                       alone_ws_bytes={**entry.alone_ws_bytes, phi: ws})
    states, spaces = dict(entry.beside_session_bytes or {}), dict(entry.beside_ws_bytes or {})
    states[side] = max(states.get(side, 0), state)
    spaces[side] = max(spaces.get(side, 0), ws)
    return replace(entry, beside_session_bytes=states, beside_ws_bytes=spaces)


if __name__ == "__main__":
    from sdf3.parent_death import die_with_parent
    die_with_parent()          # ends with the explore that started it (child_env)
    import json
    import sys
    d, name, n, th, lay = sys.argv[1:6]
    kept = Path(sys.argv[6]) if len(sys.argv) > 6 else None
    print(json.dumps(step_times(Path(d), name, int(n), int(th), lay, keep=kept,
                                whole=len(sys.argv) > 7 and sys.argv[7] == "whole").to_json()))

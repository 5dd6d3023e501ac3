"""Granularity genes end to end: predicted fps from a measured ladder profile
against measured fps of the deployed plans, and the fronts with and without the genes.

    flock /tmp/memtrade-heavy.lock python benchmarks/granularity.py [--cnns mobilenet_v2,resnet50]
        [--frames 20] [--rounds 3] [--threads 1] [--generations N] [--population N]
        [--skip-binary]

Per CNN (one partition, fp32, ONNX Runtime CPU, one thread by default):
1. `explore profile`'s ladder measurement (deploy/profile/ladder.py): every layer whole and in
   parts of k = 1, 2, 4, ... rows, inside deployments run as `explore run` runs them
   (blocked layout, --threads) -> a measured device profile (one round for the search; one
   more round before each measurement round below, and the predictions printed come from
   every round's best, so profile and measurements see the same stretches of a shared
   machine).
2. Algorithm 2 (least memory asked, so NSGA-II runs) with granularity genes (ladder) and with
   the paper's binary genes, both evaluated with that profile; the fronts' sizes counted
   between the reuse-only and the least-memory points.
3. Plans: reuse only, the least-memory point, and the fastest (predicted) ladder-front points
   within 1.1x, 1.25x and 2x the least memory; each deployed (`explore deploy`) and measured
   in its own process (`explore run`'s measure, blocked layout, --threads), interleaved with
   a plain ONNX Runtime session on the original model over --rounds rounds.
Printed per plan: memory, predicted fps, measured fps (1000 / the median frame time of the
best round: contention from other processes only adds time, and the profile keeps each
layer's best round the same way, `--rounds` rounds each), measured/predicted, the median
round's fps, fps from this thread's CPU time per frame (median round; ONNX Runtime with one
thread computes in the calling thread, so it equals wall time on a quiet core), fps from
elapsed time (frames / seconds, what `explore run` prints; median round), x plain session
(best rounds), calls per frame, arena = plan, max |diff| to the plain session. The
profile's runs are printed too: each ladder deployment's median frame beside the sum of its
layers' medians (the loop's own cost). Medians within a round because the machine is
shared: a preempted frame is an outlier in a median and a bias in a mean
(docs/profile.md, "Statistics").
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MB = 2 ** 20


def _app(cnn_name: str, folder: Path) -> Path:
    path = folder / f"{cnn_name}.yaml"
    path.write_text(f"name: granularity-{cnn_name}\nplatform: jetson-tx2\nprecision: fp32\n"
                    f"cnns:\n  - name: {cnn_name}\n    model: zoo:{cnn_name}\n    fps: 0\n")
    return path


def _save_profile(app, cnn_name: str, ladder, threads: int, path: Path, runs: list) -> Path:
    """The ladder's rounds so far as a measured device profile (as `explore profile` writes
    it, with the runs' frames for the evaluator's loop factor)."""
    from deploy.profile.ladder import ladder_rows
    from explorer.throughput.device_profile import DeviceProfile, LayerTimes, save_profile
    table = ladder.table(runs)
    models = {cnn_name: {layer: LayerTimes(t.whole_ms, by_phases=t.by_phases,
                                           region=t.region, alone=t.alone,
                                           beside_ms=t.beside_ms)
                         for layer, t in table.items()}}
    save_profile(DeviceProfile(name="granularity-bench", models=models,
                               meta={"layout": "blocked", "threads": threads,
                                     "ladder_rows": {cnn_name: ladder_rows(app.cnns[cnn_name])},
                                     "ladder_runs": {cnn_name: runs}}), path)
    return path


def _between(front, low: int, high: int) -> int:
    return len({p.memory_bytes for p in front if low <= p.memory_bytes <= high})


def child(args) -> None:
    """One measurement in this process: prints a JSON line."""
    if args.child == "plain":
        from deploy.checks import reference
        from deploy.ort.process import init_runtime
        init_runtime(args.threads, False)
        sess = reference.session(args.path, args.threads)
        print(json.dumps(reference.plain_timings(sess, args.frames)))
        return
    from deploy.run.measure import measure
    res = measure(args.path, frames=args.frames, threads=args.threads, check=False,
                  shared_pool=True, layout="blocked")
    cnn = next(iter(res["fps"]))
    print(json.dumps({"fps": res["fps"][cnn], "arena_bytes": res["arena_bytes"],
                      "calls": res["calls_per_frame"][cnn],
                      "frame_ms_median": res["frame_ms_median"][cnn],
                      "frame_cpu_ms_median": res["frame_cpu_ms_median"][cnn]}))


def _run_child(kind: str, path: str, frames: int, threads: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", kind, "--path", path,
                          "--frames", str(frames), "--threads", str(threads)],
                         check=True, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_cnn(cnn_name: str, args, tmp: Path) -> None:
    from deploy.build.derive import derive as deploy_plan
    from deploy.run.measure import measure
    from explorer.app.appfile import load_app
    from explorer.plan.derive import Evaluation, derive, plan_for
    from explorer.plan.genes import gene_space
    from explorer.plan.model import to_json
    from explorer.search.algorithm2 import algorithm2
    from explorer.throughput.evaluator import make_evaluator

    from deploy.profile.ladder import Ladder

    app = load_app(_app(cnn_name, tmp), mem="0")
    load_before = _load()
    start = time.perf_counter()
    ladder_runs = Ladder(app.cnns[cnn_name], tmp / f"{cnn_name}-ladder", "fp32", args.frames,
                         args.threads, "blocked")
    ladder_runs.time_round()      # the search's profile: one round
    prof = _save_profile(app, cnn_name, ladder_runs, args.threads,
                         tmp / f"{cnn_name}-prof-search.yaml", [])
    t_prof = time.perf_counter() - start
    evaluator = make_evaluator(app, str(prof))
    settings = app.search
    for key in ("population", "generations"):
        if getattr(args, key):
            settings = replace(settings, **{key: getattr(args, key)})
    outcomes, secs = {}, {}
    for gran in ("ladder",) if args.skip_binary else ("ladder", "binary"):
        ev = Evaluation(app, evaluator, space=gene_space(app, gran))
        start = time.perf_counter()
        outcomes[gran] = (algorithm2(app, ev, replace(settings, granularity=gran)), ev)
        secs[gran] = time.perf_counter() - start
    ladder, lev = outcomes["ladder"]
    binary = outcomes["binary"][0] if "binary" in outcomes else None
    zeros = tuple([0] * len(ladder.genes))
    reuse_mem, reuse_fps = lev(zeros)
    least_mem = min([ladder.front[0].memory_bytes] + ([binary.front[0].memory_bytes] if binary else []))
    picks = [("reuse only", zeros, reuse_mem, reuse_fps[cnn_name]),
             ("least memory", ladder.front[0].genes, ladder.front[0].memory_bytes,
              ladder.front[0].fps[cnn_name])]
    for factor in (1.1, 1.25, 2.0):
        ok = [p for p in ladder.front if p.memory_bytes <= factor * ladder.front[0].memory_bytes]
        best = max(ok, key=lambda p: (p.fps[cnn_name], -p.memory_bytes))
        picks.append((f"<= {factor:g}x least", best.genes, best.memory_bytes, best.fps[cnn_name]))
    runs, rows = [], []
    for i, (label, genes, mem, fps) in enumerate(picks):
        d = derive(app, lev.phases(genes))
        plan = plan_for(app, d, {cnn_name: fps}, True, genes)
        to_json(plan, tmp / f"{cnn_name}-plan{i}.json")
        folder = tmp / f"{cnn_name}-dep{i}"
        deploy_plan(plan, app.cnns, folder)
        check = measure(folder, frames=1, threads=args.threads)
        rows.append((label, mem, fps, check["max_abs_diff"][cnn_name],
                     check["arena_bytes"] == plan.buffer_bytes))
        runs.append(("deployed", str(folder)))
        if i == 0:
            manifest = json.loads((folder / "manifest.json").read_text())
            runs.insert(0, ("plain", str(folder / manifest["cnns"][cnn_name]["reference"])))
    results: list[list[dict]] = [[] for _ in runs]
    for r in range(args.rounds):
        if r:      # the profile's next round right before this round's measurements
            ladder_runs.time_round()
        for i, (kind, path) in enumerate(runs):
            results[i].append(_run_child(kind, path, args.frames, args.threads))
    # the predictions: the profile of every round (each layer's best), as for the plans
    prof_runs: list[dict] = []
    final = make_evaluator(app, str(_save_profile(app, cnn_name, ladder_runs, args.threads,
                                                  tmp / f"{cnn_name}-prof.yaml", prof_runs)))
    rows = [(label, mem, final.fps(lev.phases(genes))[cnn_name], diff, ok)
            for (label, mem, _, diff, ok), (_, genes, _, _) in zip(rows, picks)]

    def med(rs: list[dict], key: str) -> float:
        return float(np.median([r[key] for r in rs]))

    def least(rs: list[dict], key: str) -> float:
        return float(min(r[key] for r in rs))

    plain_ms = least(results[0], "frame_ms_median")
    print(f"\n{cnn_name}: ONNX Runtime CPU, threads={args.threads}, blocked layout, "
          f"{args.frames} frames x {args.rounds} interleaved rounds (a profile round before "
          f"each); first profile round {t_prof:.0f} s; "
          f"load average {load_before} before, {_load()} after")
    print("profile runs (median ms per frame): " + ", ".join(
        f"{'whole' if r['rows'] == 0 else 'k=%d' % r['rows']}"
        f"{' alone %d' % r['alone'] if 'alone' in r else ''} {r['frame_ms']:.2f} "
        f"(layers {r['layers_ms']:.2f}, {r['calls']} calls)" for r in prof_runs))
    print(f"plain ORT session: {1000 / plain_ms:.1f} fps (best round's median frame "
          f"{plain_ms:.2f} ms; median round {1000 / med(results[0], 'frame_ms_median'):.1f} fps, "
          f"CPU time {1000 / med(results[0], 'frame_cpu_ms_median'):.1f} fps, elapsed "
          f"{med(results[0], 'fps'):.1f} fps)")
    print(f"{'plan':18} {'memory MB':>10} {'x least':>8} {'pred fps':>9} {'meas fps':>9} "
          f"{'meas/pred':>10} {'med.round':>9} {'cpu fps':>8} {'elapsed':>8} {'x plain':>8} "
          f"{'calls':>6} {'arena=plan':>10} {'max|diff|':>10}")
    for (label, mem, fps, diff, arena_ok), rs in zip(rows, results[1:]):
        meas = 1000 / least(rs, "frame_ms_median")
        print(f"{label:18} {mem / MB:10.3f} {mem / least_mem:8.2f} {fps:9.1f} {meas:9.1f} "
              f"{meas / fps:10.2f} {1000 / med(rs, 'frame_ms_median'):9.1f} "
              f"{1000 / med(rs, 'frame_cpu_ms_median'):8.1f} {med(rs, 'fps'):8.1f} "
              f"{plain_ms * meas / 1000:8.2f} {rs[0]['calls']:>6} {str(arena_ok):>10} "
              f"{diff:10.2e}")
    binary_note = ("binary search skipped (--skip-binary)" if binary is None else
                   f"binary {_between(binary.front, binary.front[0].memory_bytes, reuse_mem)} "
                   f"points (least {binary.front[0].memory_bytes / MB:.3f} MB, search "
                   f"{secs['binary']:.1f} s)")
    print(f"front between reuse-only ({reuse_mem / MB:.3f} MB) and least memory: "
          f"ladder {_between(ladder.front, ladder.front[0].memory_bytes, reuse_mem)} points "
          f"(least {ladder.front[0].memory_bytes / MB:.3f} MB, search {secs['ladder']:.1f} s), "
          f"{binary_note}", flush=True)


def _load() -> str:
    """The 1-minute load average: timing figures taken above 2 are not evidence."""
    import os
    return f"{os.getloadavg()[0]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cnns", default="mobilenet_v2,resnet50")
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--population", type=int, default=0)
    parser.add_argument("--generations", type=int, default=0)
    parser.add_argument("--skip-binary", action="store_true",
                        help="search with the ladder genes only (no front comparison)")
    parser.add_argument("--keep", default=None, help="write the profile, plans and "
                        "deployments into this folder instead of a temporary one")
    parser.add_argument("--child", default=None)
    parser.add_argument("--path", default=None)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.keep:       # profile, plans and deployments kept for a closer look
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        for name in args.cnns.split(","):
            bench_cnn(name.strip(), args, Path(args.keep))
        return
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cnns.split(","):
            bench_cnn(name.strip(), args, Path(tmp))


if __name__ == "__main__":
    main()

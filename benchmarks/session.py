"""memtrade.Session against `explore run` on the same deployment: time per frame and the
process's footprint, one thread.

    python benchmarks/session.py [--frames 100] [--rounds 3] [--threads 1]

The deployment: Table 12's app 1 (MobileNetV2, fp32) at its reuse-only plan (every layer
whole, `memtrade.explore(app, mem="1GB")`), deployed once. Each case runs in its own process,
alternating `--rounds` times (the first of each round alternates too):
- `explore run DIR --threads T --frames F --json`: its frame_ms_median and footprint_bytes;
- a child that opens `memtrade.Session(DIR, threads=T)`, runs F seeded frames through
  `Session.run` (3 warm-up frames first, as `explore run`) and times each call; its
  footprint is read as `explore run` reads its own (deploy/runtime/footprint.py: peak RSS
  minus the RSS after ONNX Runtime's one-time initialisation, before the session loads).
Reported: per case the median over rounds of each run's median frame time, the ratio
Session / explore run, and the largest footprint over rounds beside the plan's memory.
Targets: time per frame within 5% of `explore run`'s; footprint <= 1.10 x plan + 4 MiB.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MiB = 2 ** 20
APP1 = ROOT / "apps" / "table12_app1_mobilenet_v2.yaml"


def session_child(folder: str, frames: int, threads: int) -> None:
    """One Session run, measured; prints its figures as JSON."""
    import numpy as np

    from deploy.ort import process
    from deploy.runtime.footprint import Footprint
    from deploy.runtime import manifest as mf
    import memtrade

    manifest = mf.load(folder)
    rng = np.random.default_rng(0)
    shots = [rng.standard_normal(manifest.cnns["mobilenet_v2"].inputs[0].shape, dtype=np.float32)
             for _ in range(16)]                     # made before the baseline, as explore run's
    fp = Footprint()
    fp.start(lambda: process.init_runtime(threads, False, manifest.plan_workspace_bytes or 0))
    session = memtrade.Session(folder, threads=threads)
    fp.loaded()
    for f in range(3):
        session.run(shots[f])
    walls = []
    for f in range(frames):
        start = time.perf_counter()
        session.run(shots[f % len(shots)])
        walls.append(time.perf_counter() - start)
    fp.ran()
    report = fp.report()
    print(json.dumps({"frame_ms_median": float(np.median(walls)) * 1e3,
                      "footprint_bytes": report["footprint_bytes"]}))


def run_child(folder: Path, frames: int, threads: int) -> dict:
    out = subprocess.run([sys.executable, "-m", "explorer.cli.main", "run", str(folder), "--json",
                          "--threads", str(threads), "--frames", str(frames)],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    data = json.loads(out.stdout)
    return {"frame_ms_median": data["frame_ms_median"]["mobilenet_v2"],
            "footprint_bytes": data["footprint_bytes"], "verdict": data["verdict"]["mobilenet_v2"]["verdict"]}


def session_case(folder: Path, frames: int, threads: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", str(folder), "--frames", str(frames),
                          "--threads", str(threads)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--child")
    args = ap.parse_args()
    if args.child:
        session_child(args.child, args.frames, args.threads)
        return
    import memtrade
    with tempfile.TemporaryDirectory() as tmp:
        found = memtrade.explore(memtrade.load_app(APP1), mem="1GB")
        dep = memtrade.deploy(found, Path(tmp) / "dep")
        plan = found.plan.memory_bytes
        load = [os.getloadavg()]
        runs, sessions = [], []
        for r in range(args.rounds):       # ABBA: the case that goes first alternates
            cases = [lambda: runs.append(run_child(dep.path, args.frames, args.threads)),
                     lambda: sessions.append(session_case(dep.path, args.frames, args.threads))]
            for case in (cases if r % 2 == 0 else cases[::-1]):
                case()
        load.append(os.getloadavg())
    run_ms = median([r["frame_ms_median"] for r in runs])
    ses_ms = median([s["frame_ms_median"] for s in sessions])
    run_fp = max(r["footprint_bytes"] for r in runs)
    ses_fp = max(s["footprint_bytes"] for s in sessions)
    bound = 1.10 * plan + 4 * MiB
    print(f"app 1 reuse-only fp32, {args.frames} frames, {args.threads} thread(s), {args.rounds} "
          f"rounds alternating; load average {load[0][0]:.2f} -> {load[1][0]:.2f}")
    print(f"plan memory {plan / MiB:.2f} MiB; footprint bound 1.10 x plan + 4 MiB = {bound / MiB:.2f} MiB")
    run_rounds = ", ".join(f"{r['frame_ms_median']:.3f}" for r in runs)
    ses_rounds = ", ".join(f"{s['frame_ms_median']:.3f}" for s in sessions)
    verdicts = ", ".join(r["verdict"] for r in runs)
    print(f"explore run   : {run_ms:.3f} ms/frame (rounds {run_rounds}), footprint "
          f"{run_fp / MiB:.2f} MiB, verdicts {verdicts}")
    print(f"Session.run   : {ses_ms:.3f} ms/frame (rounds {ses_rounds}), footprint {ses_fp / MiB:.2f} MiB")
    print(f"ratio Session / explore run: {ses_ms / run_ms:.3f} (target <= 1.05); "
          f"Session footprint / bound {ses_fp / bound:.3f} (target <= 1)")


if __name__ == "__main__":
    main()

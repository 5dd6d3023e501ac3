"""Measured fps and peak RSS of deployed plans against a plain ONNX Runtime session.

    .venv/bin/python benchmarks/deploy_fps.py [--app apps/table12_app1_mobilenet_v2.yaml]
                                              [--frames 50] [--rounds 3] [--threads 0]

The plans are the explorer's: `explore APP --mem 1GB` (reuse-only: early exit, every layer
whole, Algorithm 1's buffers) and `explore APP --mem 0` (the least-memory point of the
front), each deployed with `explore deploy`. Each deployment runs three times: every step on
ONNX Runtime's NCHWc kernels with reorders at each step (`nchwc`), the faster of NCHWc and
plain NCHW per step (`auto`), and whole-layer edges stored in ORT's blocked layout where
both ends allow it (`blocked`, deploy/ort/blocked.py; what `explore run` does); the plain
session runs the original model; every run is its own process, so each peak RSS is its own,
and the runs are interleaved over --rounds rounds because this machine's load moves.
Target: reuse-only >= 0.9x the plain session's fps (same threads, same frames).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _plan(app: str, mem: str, tmp: Path) -> Path:
    """plan.json written by `explore APP --mem MEM`."""
    from explorer.cli.main import main as explore
    out = tmp / f"explore-{mem}"
    with contextlib.redirect_stdout(io.StringIO()):
        status = explore([app, "--mem", mem, "--out", str(out), "--quiet"])
    if status not in (0, 3):
        raise SystemExit(f"explore {app} --mem {mem}: exit {status}")
    return out / "plan.json"


def child(args) -> None:
    """One measurement in this process: prints a JSON line."""
    if args.child == "plain":
        from deploy.checks import reference
        from deploy.run.measure import peak_rss_bytes
        sess = reference.session(args.path, args.threads)
        fps = reference.plain_fps(sess, args.frames)
        print(json.dumps({"fps": fps, "peak_rss_bytes": peak_rss_bytes()}))
        return
    from deploy.run.measure import measure
    res = measure(args.path, frames=args.frames, threads=args.threads, check=False,
                  shared_pool=True, layout=args.layout)
    cnn = next(iter(res["fps"]))
    print(json.dumps({"fps": res["fps"][cnn], "peak_rss_bytes": res["peak_rss_bytes"],
                      "arena_bytes": res["arena_bytes"], "calls": res["calls_per_frame"][cnn]}))


def _run_child(kind: str, path: str, frames: int, threads: int, layout: str = "auto") -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", kind, "--path", path,
                          "--frames", str(frames), "--threads", str(threads), "--layout", layout],
                         check=True, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", default=str(ROOT / "apps/table12_app1_mobilenet_v2.yaml"))
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3,
                        help="interleaved rounds (each run once per round); medians reported")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--layout", default="auto")
    parser.add_argument("--child", default=None)
    parser.add_argument("--path", default=None)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    from deploy.run.measure import measure
    from explorer.cli.main import main as explore
    from explorer.plan.plan_file import from_json
    app = str(Path(args.app).resolve())
    few = max(5, args.frames // 10)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for mem, label in (("1GB", "reuse-only plan"), ("0", "least-memory plan")):
            plan_path = _plan(app, mem, Path(tmp))
            plan = from_json(plan_path)
            folder = Path(tmp) / f"deploy-{mem}"
            with contextlib.redirect_stdout(io.StringIO()):
                if explore(["deploy", str(plan_path), "--out", str(folder)]) != 0:
                    raise SystemExit(f"explore deploy {plan_path} failed")
            if not runs:   # the plain session on the same (original) model file
                manifest = json.loads((folder / "manifest.json").read_text())
                ref = next(iter(manifest["cnns"].values()))["reference"]
                src = str(folder / ref)
                runs.append(("plain ORT session", "plain", src, args.frames, "auto", None, None))
            res = measure(folder, frames=2, threads=args.threads)
            diff = max(res["max_abs_diff"].values())
            frames = args.frames if mem == "1GB" else few
            for layout in ("nchwc", "auto", "blocked"):
                runs.append((f"{label}, {layout}", "deployed", str(folder), frames, layout,
                             plan.buffer_bytes, diff))
        # interleaved: the machine's load changes over minutes, so every run sees each round
        results: list[list[dict]] = [[] for _ in runs]
        for _ in range(args.rounds):
            for i, (_, kind, path, frames, layout, _, _) in enumerate(runs):
                results[i].append(_run_child(kind, path, frames, args.threads, layout))
    med = [float(np.median([r["fps"] for r in rs])) for rs in results]
    ratio = [float(np.median([r["fps"] / p["fps"] for r, p in zip(rs, results[0])])) for rs in results]
    print(f"{Path(args.app).name}, ONNX Runtime CPU, {args.frames} frames ({few} least memory), "
          f"threads={args.threads or 'default'}, {args.rounds} interleaved rounds (medians)")
    print(f"{'run':30} {'fps':>7} {'x plain':>8} {'arena MiB':>10} {'plan MiB':>9} "
          f"{'peak RSS MiB':>13} {'max|diff|':>10}  fps per round")
    for (label, _, _, _, _, plan_bytes, diff), rs, m, q in zip(runs, results, med, ratio):
        arena = rs[0].get("arena_bytes")
        rss = max(r["peak_rss_bytes"] for r in rs)
        print(f"{label:30} {m:7.1f} {q:8.2f} "
              f"{'' if arena is None else f'{arena / 2**20:10.2f}':>10} "
              f"{'' if plan_bytes is None else f'{plan_bytes / 2**20:9.2f}':>9} "
              f"{rss / 2**20:13.1f} {'' if diff is None else f'{diff:10.2e}':>10}  "
              + " ".join(f"{r['fps']:.1f}" for r in rs))
    print("x plain: median over rounds of fps / the plain session's fps in the same round")


if __name__ == "__main__":
    main()

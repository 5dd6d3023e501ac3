"""Region steps against one call per layer and phase: plan memory, the process's
footprint, fps, x plain ONNX Runtime, calls per frame and the plan's predicted fps, for the
reuse-only plan, the least-memory plan and two front points between them.

    python benchmarks/region_steps.py [--models mobilenet_v2,resnet50,yolov2_16]
                                      [--threads 1,2] [--frames 20] [--profile]
                                      [--keep DIR]

Per model and thread count: `explore APP --mem 0` (the least-memory plan and the front),
`--mem 1GB` (reuse-only), and `--mem M` at the front points a third and two thirds of the way
from the least to the most memory (the search is seeded: the same front, the fastest point
within M); with `--profile`, `explore profile --threads N` first and every search evaluates
with it, so the predicted fps is this machine's. Every by-parts plan is deployed twice
(`explore deploy --steps layers` and `--steps regions`). Each run is its own process
(benchmarks/footprint.py's child: footprint = peak RSS - RSS after ONNX Runtime's one-time
init, `explore run`'s layout and shared thread pool).

Targets: footprint <= 1.10 x plan + 4 MiB and a plan with less memory never a
larger footprint; least-memory MobileNetV2 <= 200 calls per frame, >= 0.8x plain at 1
thread, >= 0.6x at 2; YOLOv2-16 least memory >= 0.9x plain at 1 thread; predicted fps
within 10% of measured. `pred/meas` divides by the fps of the whole run (frames over
elapsed time), `pred/med` by the median frame's: the profile's times are medians, and on a
shared machine a neighbour's burst slows the mean, not the median.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from footprint import MiB, explore_app, run_child, model_path, write_app  # noqa: E402


def plans(name: str, folder: Path, threads: int, profile: bool) -> tuple[str, list[tuple[str, dict, Path]]]:
    """The model and its four plans: (label, plan.json, its folder)."""
    model = model_path(name, folder)
    app = write_app(folder / f"{name}.yaml", f"rs-{name}", name, model)
    extra = []
    if profile:
        prof = folder / f"{name}-t{threads}-profile.yaml"
        if explore_app(["profile", str(app), "--out", str(prof), "--repeats", "1",
                     "--threads", str(threads), "--force"]) != 0:
            raise SystemExit(f"explore profile {app} failed")
        extra = ["--evaluator", str(prof)]

    def search(mem: str, tag: str) -> tuple[dict, Path]:
        run = folder / f"{name}-t{threads}-{tag}"
        status = explore_app([str(app), *extra, "--mem", mem, "--out", str(run), "--quiet", "--force"])
        if status not in (0, 3):
            raise SystemExit(f"explore {app} --mem {mem}: exit {status}")
        return json.loads((run / "plan.json").read_text()), run

    least, run0 = search("0", "least")
    points = sorted(json.loads((run0 / "pareto.json").read_text())["points"],
                    key=lambda p: p["memory_bytes"])
    out = [("least memory", least, run0)]
    lo, hi = points[0]["memory_bytes"], points[-1]["memory_bytes"]
    for frac in (1 / 3, 2 / 3):
        target = lo + frac * (hi - lo)
        mem = max(p["memory_bytes"] for p in points if p["memory_bytes"] <= target)
        plan, run = search(str(mem), f"front{round(frac * 3)}")
        out.append((f"front {round(frac * 3)}/3", plan, run))
    reuse, run1 = search("1GB", "reuse")
    out.append(("reuse only", reuse, run1))
    return str(model), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,resnet50,yolov2_16")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--keep", default=None,
                        help="a folder for the profiles, plans and deployments (kept after the run)")
    parser.add_argument("--profile", action="store_true",
                        help="plans from `explore profile` at each thread count (predicted fps)")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"each case its own process, {args.frames} frames; load {load[0]:.2f} at start")
    head = (f"{'case':30} {'plan MiB':>8} {'footprint':>9} {'limit':>6} {'ok':>3} {'fps':>7} "
            f"{'x plain':>7} {'calls':>6} {'pred fps':>8} {'pred/meas':>9} {'pred/med':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for name in args.models.split(","):
            made: dict[int, tuple] = {}
            for threads in (int(t) for t in args.threads.split(",")):
                start = time.perf_counter()
                key = threads if args.profile else 0      # without a profile: one set of plans
                if key not in made:
                    made[key] = plans(name, folder, threads, args.profile)
                model, chosen = made[key]
                plain = run_child("plain", model, args.frames, threads)
                print(f"\n{name}, {threads} thread(s) (plans {time.perf_counter() - start:.0f} s, "
                      f"load {os.getloadavg()[0]:.2f})")
                print(head)
                print(f"{'plain ORT session':30} {'':>8} {plain['footprint_bytes'] / MiB:9.1f} "
                      f"{'':>6} {'':>3} {plain['fps']:7.1f} {1.0:7.2f}")
                for label, plan, run in chosen:
                    by_parts = any(int(v) > 1 for ph in plan["phases"].values() for v in ph.values())
                    for steps in (("layers", "regions") if by_parts else ("regions",)):
                        dep = folder / f"{run.name}-{steps}"
                        if explore_app(["deploy", str(run / "plan.json"), "--out", str(dep),
                                     "--steps", steps, "--force"]) != 0:
                            raise SystemExit(f"explore deploy {run / 'plan.json'} failed")
                        res = run_child("deployed", str(dep), args.frames, threads)
                        mem = plan["memory_bytes"]
                        limit = 1.10 * mem + 4 * MiB
                        pred = (plan.get("fps") or {}).get(name)
                        calls = next(iter(res["calls_per_frame"].values()))
                        median_fps = 1e3 / next(iter(res["frame_ms_median"].values()))
                        print(f"{label + ', ' + steps:30} {mem / MiB:8.2f} "
                              f"{res['footprint_bytes'] / MiB:9.1f} {limit / MiB:6.1f} "
                              f"{'yes' if res['footprint_bytes'] <= limit else 'NO':>3} "
                              f"{res['fps']:7.1f} {res['fps'] / plain['fps']:7.2f} {calls:6.0f} "
                              f"{pred or 0:8.1f} {(pred or 0) / res['fps']:9.2f} "
                              f"{(pred or 0) / median_fps:8.2f}")
    print(f"\nlimit: 1.10 x plan + 4 MiB; load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()

"""Deploy the paper's apps and check them: outputs against the unmodified models, arena
bytes against the plan, calls per frame against the plan's firings.

    .venv/bin/python benchmarks/deploy_apps.py [--precision fp32] [--frames 3] [APP.yaml ...]

Plans: every layer whole with buffer reuse ("reuse-only") and every layer that can, by
parts ("all parts": the least-memory end), built with the tests' independent plan builder
on the app's own partitions and pipelines (plans from `explore` go through `explore deploy`).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ["apps/table13_mobilenet_sequential.yaml", "apps/table13_resnet_sequential.yaml",
        "apps/table12_app3_mobilenet_v2_pipelined.yaml", "apps/table13_multi_cnn.yaml"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("apps", nargs="*", default=APPS)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--frames", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from test_deploy_fixtures import plan_for_app
    from deploy.derive import derive
    from deploy.measure import measure
    from explorer.appfile import load_app
    print(f"{'app':40} {'plan':10} {'arena B':>10} {'=plan':>5} {'calls':>6} {'=firings':>8} "
          f"{'max|diff|':>9} fps")
    for path in args.apps:
        app = load_app(ROOT / path, precision=args.precision)
        for mode in ("whole", "all_parts"):
            plan = plan_for_app(app, mode)
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                derive(plan, app.cnns, tmp)
                res = measure(tmp, frames=args.frames * len(app.cnns), warmup=1)
            fired = {c: sum(len(f) for p, f in plan["firings"].items() if p.split(".")[0] == c)
                     for c in app.cnns}
            calls_ok = all(res["calls_per_frame"][c] == fired[c] for c in app.cnns)
            diff = max(v for v in res["max_abs_diff"].values())
            fps = ", ".join(f"{c} {v:.1f}" for c, v in res["fps"].items())
            label = "reuse-only" if mode == "whole" else "all parts"
            print(f"{app.name:40} {label:10} {res['arena_bytes']:10d} "
                  f"{str(res['arena_bytes'] == plan['buffer_bytes']):>5} "
                  f"{sum(res['calls_per_frame'].values()):6d} {str(calls_ok):>8} {diff:9.2e} {fps}"
                  f"  ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()

"""The paper's apps end to end through the front door: `explore APP --mem M --out D` writes
plan.json, `explore deploy D/plan.json --out DEP` builds it, and the run checks it: outputs
against the unmodified models, arena bytes against the plan's buffer bytes, compiled calls
per frame against the deployment's steps (a region step: a band of the plan's firings,
deploy/build/regions.py), whose firings must be the plan's.

    .venv/bin/python benchmarks/deploy_apps.py [--frames 2] [--population P --generations G]
                                               [--only SUBSTRING] [--precision fp32]
                                               [--layout blocked|auto|nchwc|nchw]

Cases: MobileNetV2 (Table 12 app 1) reuse-only (--mem 1GB: early exit), at Table 12's
15 MB and at the least memory (--mem 0); ResNet-50 (Table 13) the same with its 26 MB /
75 fps; the multi-CNN apps 5 and 6 and the pipelined app 3 at their files' constraints and
at the least memory. Exit status 1 if any check fails. Tolerance: 1e-4 for fp32 data, 1e-2
for fp16 data, both times max(1, largest |output| of the unmodified model). The fp16 arena
of fp16/mixed plans rounds every stored tensor (relative 2^-11 each, arithmetic in fp32):
ResNet-50's softmax is off by 7.3e-3 after ~50 rounded tensors whose values reach 17,
while the same plan in fp32 (--precision fp32) is off by 8e-6.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
M2, R50 = "apps/table12_app1_mobilenet_v2.yaml", "apps/table13_resnet_sequential.yaml"
CASES = [
    (M2, "reuse-only", ["--mem", "1GB"]),
    (M2, "Table 12: 15 MB", ["--mem", "15MB", "--prefer", "memory"]),
    (M2, "least memory", ["--mem", "0"]),
    (R50, "reuse-only", ["--mem", "1GB", "--fps", "0"]),
    (R50, "Table 13: 26 MB, 75 fps", []),
    (R50, "least memory", ["--mem", "0", "--fps", "0"]),
    ("apps/table12_app3_mobilenet_v2_pipelined.yaml", "Table 12: 30 MB", []),
    ("apps/table12_app3_mobilenet_v2_pipelined.yaml", "Table 12: 15 MB", ["--mem", "15MB", "--prefer", "memory"]),
    ("apps/table12_app3_mobilenet_v2_pipelined.yaml", "least memory", ["--mem", "0"]),
    ("apps/table12_app5_multi_cnn_1.yaml", "Table 12: 200 MB", []),
    ("apps/table12_app5_multi_cnn_1.yaml", "least memory", ["--mem", "0"]),
    ("apps/table12_app6_multi_cnn_2.yaml", "Table 12: 500 MB", []),
    ("apps/table12_app6_multi_cnn_2.yaml", "least memory", ["--mem", "0"]),
]


def check_case(app: str, extra: list[str], args, tmp: Path) -> dict:
    """Explore, deploy and run one case; every figure is read from the run."""
    from deploy.run.measure import measure
    from explorer.cli.main import main as explore

    out, dep = tmp / "explore", tmp / "deploy"
    cmd = [str(ROOT / app), *extra, "--out", str(out), "--quiet"]
    for key in ("population", "generations", "precision"):
        if getattr(args, key) is not None:
            cmd += [f"--{key}", str(getattr(args, key))]
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):   # the table below says what matters
        status = explore(cmd)
    if status not in (0, 3):
        raise SystemExit(f"explore {' '.join(cmd)}: exit {status}")
    searched = time.perf_counter() - start
    plan = json.loads((out / "plan.json").read_text())
    with contextlib.redirect_stdout(io.StringIO()):
        deployed = explore(["deploy", str(out / "plan.json"), "--out", str(dep)])
    if deployed != 0:
        raise SystemExit(f"explore deploy {out / 'plan.json'} failed")
    n = len(plan["fps"])
    res = measure(dep, frames=args.frames * n, warmup=2, layout=args.layout)
    from deploy.runtime import manifest as mf
    manifest = mf.load(dep)
    steps = mf.firings_per_frame(manifest)
    made = {p.name: [tuple(f) for s in p.steps for f in (s.region or [(s.layer, s.phase)])]
            for p in manifest.partitions}
    firings_ok = all(made[name] == [(layer, layers[:i].count(layer)) for i, layer in enumerate(layers)]
                     for name, layers in plan["firings"].items())
    fp16 = int(plan["data_bytes"]) == 2
    mag = max((v for v in res.get("max_abs_output", {}).values() if v is not None), default=1.0)
    tol = (1e-2 if fp16 else 1e-4) * max(1.0, mag)
    return {"plan": plan, "res": res, "status": status, "searched_s": searched,
            "total_s": time.perf_counter() - start,
            "arena_ok": res["arena_bytes"] == plan["buffer_bytes"],
            "calls_ok": firings_ok and all(res["calls_per_frame"][c] == steps[c] for c in steps),
            "diff": max(res["max_abs_diff"].values()), "tol": tol, "mag": mag,
            "by_parts": sum(1 for ph in plan["phases"].values() for v in ph.values() if v > 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=2, help="frames per CNN")
    parser.add_argument("--population", type=int, default=None)
    parser.add_argument("--generations", type=int, default=None)
    parser.add_argument("--precision", default=None, help="override every app's precision")
    parser.add_argument("--layout", default="blocked", help="ONNX Runtime layout, as `explore run --layout`")
    parser.add_argument("--only", default=None, help="cases whose app path contains this")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    bad = 0
    print(f"{'app':44} {'case':24} {'memory MB':>9} {'buffers B':>10} {'arena=':>6} "
          f"{'calls':>6} {'=fired':>6} {'max|diff|':>9} {'max|out|':>8} {'ok':>3}  fps (s)")
    for app, label, extra in CASES:
        if args.only and args.only not in app:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            r = check_case(app, extra, args, Path(tmp))
        plan, res = r["plan"], r["res"]
        ok = r["arena_ok"] and r["calls_ok"] and r["diff"] < r["tol"]
        bad += not ok
        fps = ", ".join(f"{c} {v:.1f}" for c, v in res["fps"].items())
        print(f"{Path(app).stem:44} {label:24} {plan['memory_bytes'] / 2**20:9.2f} "
              f"{plan['buffer_bytes']:10d} {str(r['arena_ok']):>6} "
              f"{sum(res['calls_per_frame'].values()):6d} {str(r['calls_ok']):>6} "
              f"{r['diff']:9.2e} {r['mag']:8.2f} {'yes' if ok else 'NO':>3}  {fps} "
              f"({plan['precision']}, {r['by_parts']} layers by parts, exit {r['status']}, "
              f"search {r['searched_s']:.0f} s, all {r['total_s']:.0f} s)", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""Measured fps and peak RSS of deployed plans against a plain ONNX Runtime session.

    .venv/bin/python benchmarks/deploy_fps.py [--model mobilenet_v2] [--frames 50]

For the zoo model it deploys the reuse-only plan (every layer whole, buffers shared by
Algorithm 1-style greedy reuse) and the least-memory plan (every layer that can, by parts),
then runs each, and the plain session on the original model, in its own process so each
peak RSS is its own. Prints one table; target: reuse-only >= 0.9x the plain session's fps.
Plans come from explorer.derive when it exists, else from the tests' independent builder.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _plan(cnn, mode: str) -> dict:
    from csdf.parts import all_parts
    sys.path.insert(0, str(ROOT / "tests"))
    from test_deploy_fixtures import make_plan
    phases = all_parts(cnn) if mode == "least" else {n: 1 for n in cnn.order()}
    return make_plan([cnn], {cnn.name: phases})


def child(args) -> None:
    """One measurement in this process: prints a JSON line."""
    if args.child == "plain":
        import numpy as np
        from deploy import reference
        from deploy.measure import peak_rss_bytes
        sess = reference.session(args.path, args.threads)
        shape = [d if isinstance(d, int) else 1 for d in sess.get_inputs()[0].shape]
        frames = [np.random.default_rng(i).standard_normal(shape).astype(np.float32)
                  for i in range(args.frames)]
        for f in frames[:3]:
            reference.run(sess, f)
        start = time.perf_counter()
        for f in frames:
            reference.run(sess, f)
        fps = args.frames / (time.perf_counter() - start)
        print(json.dumps({"fps": fps, "peak_rss_bytes": peak_rss_bytes()}))
        return
    from deploy.measure import measure
    res = measure(args.path, frames=args.frames, threads=args.threads, check=False,
                  shared_pool=True)
    cnn = next(iter(res["fps"]))
    print(json.dumps({"fps": res["fps"][cnn], "peak_rss_bytes": res["peak_rss_bytes"],
                      "arena_bytes": res["arena_bytes"], "calls": res["calls_per_frame"][cnn]}))


def _run_child(kind: str, path: str, frames: int, threads: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", kind, "--path", path,
                          "--frames", str(frames), "--threads", str(threads)],
                         check=True, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mobilenet_v2")
    parser.add_argument("--frames", type=int, default=50)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--child", default=None)
    parser.add_argument("--path", default=None)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    from csdf import zoo
    from csdf.onnx_import import load_onnx
    from deploy.derive import derive
    from deploy.measure import measure
    src = str(zoo.model_path(args.model))
    cnn = load_onnx(src, args.model)
    rows = [("plain ORT session", _run_child("plain", src, args.frames, args.threads), None, None)]
    with tempfile.TemporaryDirectory() as tmp:
        for mode, label in (("reuse", "reuse-only plan"), ("least", "least-memory plan (all by parts)")):
            plan = _plan(cnn, mode)
            folder = Path(tmp) / mode
            derive(plan, {cnn.name: cnn}, folder)
            check = measure(folder, frames=2, threads=args.threads)
            frames = args.frames if mode == "reuse" else max(5, args.frames // 10)
            rows.append((label, _run_child("deployed", str(folder), frames, args.threads),
                         plan["buffer_bytes"], check["max_abs_diff"][cnn.name]))
    base = rows[0][1]["fps"]
    print(f"{args.model}, ONNX Runtime CPU, {args.frames} frames, threads={args.threads or 'default'}")
    print(f"{'run':36} {'fps':>8} {'x plain':>8} {'arena MiB':>10} {'plan MiB':>9} "
          f"{'peak RSS MiB':>13} {'max|diff|':>10}")
    for label, r, plan_bytes, diff in rows:
        arena = r.get("arena_bytes")
        print(f"{label:36} {r['fps']:8.1f} {r['fps'] / base:8.2f} "
              f"{'' if arena is None else f'{arena / 2**20:10.2f}':>10} "
              f"{'' if plan_bytes is None else f'{plan_bytes / 2**20:9.2f}':>9} "
              f"{r['peak_rss_bytes'] / 2**20:13.1f} {'' if diff is None else f'{diff:10.2e}':>10}")


if __name__ == "__main__":
    main()

"""How the default search scales with the network: for each network, `explore
APP --mem 0` with the app's default search settings in a child process, stopped from
outside after `--cap` seconds if it has not finished; prints genes, evaluations per
second, search seconds, front points and least memory, or that it did not finish.

    PYTHONPATH=$PWD python benchmarks/search_scale.py [--nets mobilenet_v2,resnet50] [--cap 300]
        [--time-limit S] [--onnx a.onnx,b.onnx]

`--time-limit S` passes the search's own budget (explorer/search/deadline.py) instead.
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

ROOT = Path(__file__).resolve().parents[1]
NETS = ("mobilenet_v2", "resnet50", "inception_v2", "efficientnet_b0", "yolov2_16", "densenet121")


def one(model: str, cap: float, limit: float | None, work: Path) -> dict:
    app = work / "app.yaml"
    app.write_text(f"name: scale\ncnns:\n  - {{name: net, model: '{model}'}}\n")
    argv = [sys.executable, "-m", "explorer.cli.main", str(app), "--mem", "0", "--quiet",
            "--out", str(work / "run"), "--force"]
    if limit is not None:
        argv += ["--time-limit", str(limit)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=cap, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"model": model, "finished": False, "wall": cap}
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 3):
        return {"model": model, "finished": False, "wall": wall,
                "error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    front = json.loads((work / "run" / "pareto.json").read_text())
    return {"model": model, "finished": True, "wall": wall, "genes": len(front["genes"]),
            "rate": front["evaluations"] / max(front["seconds"], 1e-9), "search": front["seconds"],
            "points": len(front["points"]), "least": min(p["memory_bytes"] for p in front["points"]),
            "stopped": front.get("stopped_on_time")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default=",".join(NETS), help="zoo names")
    parser.add_argument("--onnx", default="", help="ONNX files, comma-separated")
    parser.add_argument("--cap", type=float, default=300.0, help="seconds before a run is stopped")
    parser.add_argument("--time-limit", type=float, dest="limit")
    args = parser.parse_args()
    models = [f"zoo:{n}" for n in args.nets.split(",") if n] + \
        [str(Path(p).resolve()) for p in args.onnx.split(",") if p]
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| network | genes | evaluations/s | search s | wall s | front points | least MiB | note |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for model in models:
        with tempfile.TemporaryDirectory() as tmp:
            r = one(model, args.cap, args.limit, Path(tmp))
        if not r["finished"]:
            print(f"| {model} | - | - | - | {r['wall']:.0f} | - | - | "
                  f"{r.get('error') or f'did not finish in {args.cap:g} s'} |", flush=True)
            continue
        print(f"| {model} | {r['genes']} | {r['rate']:.0f} | {r['search']:.1f} | {r['wall']:.1f} | "
              f"{r['points']} | {r['least'] / 2**20:.3f} | "
              f"{'stopped on time: ' + r['stopped'] if r['stopped'] else 'finished'} |", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

"""TASO primitive selection on GoogLeNet-, ResNet-, VGG- and SqueezeNet-style networks
(csdf/zoo/small.py), measured in one run: per network the time-only, memory-only and greedy
points, the front's size, the solver's time per budget, the paper's ratios, the GA's
hypervolume ratio, and deployed plans' measured time against the profile's sum.

    flock /tmp/memtrade-heavy.lock python benchmarks/primitives.py [--nets vgg_small,...]
        [--repeats 10] [--threads 1] [--frames 200] [--out DIR]

Per network, each in its own process: `explore profile APP --primitives` (times, measured
workspaces, transitions), `explore primitives APP --profile P` for the time-only plan and
again with --mem at the headline point (the least memory within 1.15x the time-only time),
both deployed with `explore deploy` and run with `explore run --json` (frames after 3
warm-ups; ms/frame = 1000 / fps, wall clock) and in a child that times each frame's steps
on one thread (median thread CPU time and wall time per frame; see frame_cpu). Prints one table and writes DIR/summary.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
NETS = ("googlenet_small", "resnet_small", "vgg_small", "squeezenet_small")


def explore(*args: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "explorer.cli.main", *args], cwd=ROOT,
                          capture_output=True, text=True, env=env)
    if proc.returncode not in (0, 3):
        raise SystemExit(f"explore {' '.join(args)}: exit {proc.returncode}\n{proc.stderr}")
    return proc.stdout


def frame_cpu(dep: Path, frames: int) -> dict:
    """In a child process: the deployment's frame, step after step on one thread (one intra-op
    thread: ONNX Runtime runs on the caller), median over frames of the thread's CPU time
    and of the wall time. On this shared machine the wall time includes preemption by other
    processes (load averages of 30-150 on 2 cores during these runs); CPU time does not."""
    code = f"""
import json, time, numpy as np
from deploy.runtime import manifest as mf, executor as ex
from deploy.ort.backend import OrtBackend
m = mf.load({str(dep)!r})
net = list(m.cnns)[0]
EX = ex.Executor(m, {str(dep)!r}, OrtBackend(m.dtype, 1, layout="blocked"))   # kept: it owns the weights
run = EX.cnns[net]
ex.set_frame(np.random.default_rng(0).standard_normal(m.cnns[net].inputs[0].shape).astype(np.float32))
calls = [c for part in run.partitions for c in part.calls[0]]
cpu, wall = [], []
for i in range({frames} + 3):
    t, w = time.thread_time(), time.perf_counter()
    for c in calls:
        c()
    if i >= 3:
        cpu.append(time.thread_time() - t)
        wall.append(time.perf_counter() - w)
print(json.dumps({{"cpu_ms": float(np.median(cpu)) * 1e3, "wall_ms": float(np.median(wall)) * 1e3}}))
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env=env, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_net(net: str, out: Path, args) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    app = out / "app.yaml"                 # csdf/zoo/small.py, built once and cached
    app.write_text(f"name: {net}\nprecision: fp32\ncnns:\n  - name: {net}\n    model: zoo:{net}\n")
    prof = out / "profile.yaml"
    explore("profile", str(app), "--primitives", "--out", str(prof), "--force",
            "--repeats", str(args.repeats), "--threads", str(args.threads))
    explore("primitives", str(app), "--profile", str(prof), "--out", str(out / "fast"), "--force")
    import yaml
    layers = yaml.safe_load(prof.read_text())["primitives"][net]["layers"]
    per = {}          # primitive -> [time / fastest, workspace bytes] over the conv layers it computes
    for entry in layers.values():
        if len(entry) < 3:          # not a Conv (those have ort_nchw, ort_nchwc at most)
            continue
        best = min(v["ms"] for v in entry.values())
        for name, v in entry.items():
            per.setdefault(name, []).append((v["ms"] / best, v["workspace_bytes"]))
    library = {name: {"layers": len(v), "fastest_on": sum(r == 1.0 for r, _ in v),
                      "median_slowdown": sorted(r for r, _ in v)[len(v) // 2],
                      "max_workspace_bytes": max(w for _, w in v),
                      "sum_workspace_bytes": sum(w for _, w in v)} for name, v in per.items()}
    study = json.loads((out / "fast" / "primitives.json").read_text())
    head = study["headline"]
    explore("primitives", str(app), "--profile", str(prof), "--out", str(out / "lean"), "--force",
            "--mem", f"{head['point_bytes']}")
    row = {"net": net, "layers": len(study["layers"]),
           "front": len(study["fronts"]["sum"]["points"]),
           "front_ws": len(study["fronts"]["workspace"]["points"]),
           "complete": study["fronts"]["sum"]["complete"],
           "max_budget_s": max(study["fronts"][s]["max_budget_s"] for s in study["fronts"]),
           "baselines": {k: {"ms": v["time_ms"], "bytes": v["memory_bytes"], "counts": v["counts"]}
                         for k, v in study["baselines"].items()},
           "headline": head, "ga_hv_ratio": study["ga"]["hv_ratio"],
           "greedy_speedups": study["greedy_speedups"], "library": library, "deployed": {}}
    for tag in ("fast", "lean"):
        plan_dir = out / tag
        chosen = json.loads((plan_dir / "primitives.json").read_text())["chosen"]
        dep = out / f"dep-{tag}"
        explore("deploy", str(plan_dir / "plan.json"), "--out", str(dep), "--force")
        res = json.loads(explore("run", str(dep), "--frames", str(args.frames), "--threads",
                                 str(args.threads), "--json"))
        fps = res["fps"][net]
        own = frame_cpu(dep, args.frames)
        row["deployed"][tag] = {"predicted_ms": chosen["time_ms"], "measured_ms": 1000.0 / fps,
                                "ratio": 1000.0 / fps / chosen["time_ms"],
                                "frame_cpu_ms": own["cpu_ms"], "frame_wall_ms": own["wall_ms"],
                                "cpu_ratio": own["cpu_ms"] / chosen["time_ms"],
                                "max_abs_diff": res["max_abs_diff"][net],
                                "verdict": res.get("verdict", {}).get(net, {}).get("verdict"),
                                "arena_bytes": res["arena_bytes"], "peak_rss_bytes": res["peak_rss_bytes"],
                                "counts": chosen["counts"], "memory_bytes": chosen["memory_bytes"]}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default=",".join(NETS))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="primitives-bench-"))
    rows = []
    for net in args.nets.split(","):
        row = run_net(net, out / net, args)
        rows.append(row)
        b, h, d = row["baselines"], row["headline"], row["deployed"]
        g = [s for s in row["greedy_speedups"] if s is not None]
        print(f"{net}: {row['layers']} layers; front {row['front']} points (workspace strategy "
              f"{row['front_ws']}), slowest budget {row['max_budget_s']:.3f} s", flush=True)
        for k, v in b.items():
            print(f"  {k:<18} {v['ms']:8.3f} ms {v['bytes'] / 2**20:8.3f} MB  {v['counts']}")
        print(f"  headline: {h['memory_ratio']:.2f}x less memory at {h['time_ratio']:.3f}x time "
              f"({h['point_bytes'] / 2**20:.3f} MB vs {h['time_only_bytes'] / 2**20:.3f} MB)")
        print(f"  time-only ILP vs greedy (no budget): {b['greedy, no budget']['ms'] / b['time-only (ILP)']['ms']:.3f}x; "
              f"ILP over greedy at the front's budgets: max {max(g, default=float('nan')):.2f}x, "
              f"{len(row['greedy_speedups']) - len(g)} of {len(row['greedy_speedups'])} budgets infeasible for greedy")
        print(f"  NSGA-II hypervolume / exact: {row['ga_hv_ratio']:.4f}")
        for name, v in row["library"].items():
            print(f"  {name:<10} on {v['layers']:>2} convs: fastest on {v['fastest_on']:>2}, median "
                  f"{v['median_slowdown']:.2f}x the fastest, workspace max {v['max_workspace_bytes'] / 2**20:.2f} MB, "
                  f"sum {v['sum_workspace_bytes'] / 2**20:.2f} MB")
        for tag, v in d.items():
            print(f"  deployed {tag}: predicted {v['predicted_ms']:.3f} ms; explore run "
                  f"{v['measured_ms']:.3f} ms wall ({v['ratio']:.3f}x), verdict {v['verdict']}, max|diff| {v['max_abs_diff']:.2e}, "
                  f"peak RSS {v['peak_rss_bytes'] / 2**20:.1f} MiB; frame median CPU "
                  f"{v['frame_cpu_ms']:.3f} ms ({v['cpu_ratio']:.3f}x), wall {v['frame_wall_ms']:.3f} ms")
    (out / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {out}/summary.json")


if __name__ == "__main__":
    main()

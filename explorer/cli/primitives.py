"""`explore primitives APP.yaml [--mem X | --fps Y] [--out DIR] [--profile FILE]`: TASO's
primitive selection (explorer/primitives/ilp.py) on this machine's measured primitives.

Writes DIR/primitives.json and primitives.csv (the exact fronts of both memory strategies,
the time-only, memory-only and greedy points, the GA-vs-ILP hypervolume ratio, solver
times), report.html (the front, drawn by explorer/report/pareto.py) and plan.json (every layer
whole, buffers by Algorithm 1, key `primitives`: the chosen primitive per layer; its
`workspace_bytes` and `memory_bytes` by explorer/throughput/runtime_costs.py's workspace term, fed with the
chosen steps' measured workspaces) for `explore deploy`. With --mem: the fastest plan within it (Eq. 13); with --fps: the least
memory at that speed (Eq. 14, or Eq. 15 with --strategy workspace); neither: time-only.
Exit 3 when no plan meets the constraints (the least-memory plan is written).
"""
from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from explorer.report.outputs import claim_dir, claim_new_dir, safe_name
from explorer.app.units import format_bytes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", help="application file (YAML)")
    parser.add_argument("--mem", help="memory budget, e.g. 8MB (Eq. 13)")
    parser.add_argument("--fps", help="throughput budget: one value or name=value,... (Eq. 14/15)")
    parser.add_argument("--strategy", choices=["sum", "workspace"], default="sum",
                        help="workspace memory: summed over steps (Eq. 13/14) or one shared "
                             "workspace of the largest step (Eq. 15)")
    parser.add_argument("--profile", help="profile with measured primitives "
                        "(explore profile APP --primitives); default: measure now")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls when measuring")
    parser.add_argument("--threads", type=int, default=0, help="ONNX Runtime threads when measuring")
    parser.add_argument("--max-points", type=int, default=200, help="front points at most")
    parser.add_argument("--seed", type=int, default=0, help="GA seed")
    parser.add_argument("--ga-generations", type=int, default=100,
                        help="NSGA-II generations for the GA-vs-ILP comparison (population 64)")
    parser.add_argument("--out", help="output directory (default: runs/<app>-primitives-<n>)")
    parser.add_argument("--force", action="store_true", help="write into a non-empty --out")


def run(args: argparse.Namespace) -> int:
    import memtrade
    from explorer.cli.run import check_threads
    from explorer.plan.model import to_json

    staged = claim_dir(args.out, args.force) if args.out else None   # before any work
    try:
        app = memtrade.load_app(args.app, mem=args.mem, fps=args.fps)
        check_threads(args.threads)
        staged = staged or claim_new_dir("runs", safe_name(f"{app.name}-primitives"))
        found = memtrade.primitives(app, args.strategy, profile=args.profile, repeats=args.repeats,
                                    threads=args.threads, max_points=args.max_points,
                                    seed=args.seed, ga_generations=args.ga_generations)
        costs, result, plan, chosen = found.costs, found.result, found.plan, found.result["chosen"]
    except BaseException:
        if staged is not None:
            staged.discard()
        raise
    with staged as out:
        to_json(plan, out / "plan.json")
        (out / "primitives.json").write_text(json.dumps(result["json"], indent=1) + "\n")
        _csv(result["json"], out / "primitives.csv")
        _report(costs, result, app, out / "report.html")
    for line in result["lines"]:
        print(line)
    print(f"chosen: {chosen['time_ms']:.3f} ms/frame, {format_bytes(chosen['memory_bytes'])} "
          f"({args.strategy}); constraints {'met' if result['met'] else 'NOT met'}")
    print(f"wrote {staged.final}/: plan.json, primitives.json, primitives.csv, report.html")
    return 0 if result["met"] else 3


def _csv(data: dict, path: Path) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["strategy", "time_ms", "memory_bytes", "solver_s", "primitives"])
        for strategy, front in data["fronts"].items():
            for p in front["points"]:
                w.writerow([strategy, f"{p['time_ms']:.6f}", p["memory_bytes"], f"{p['solver_s']:.4f}",
                            " ".join(f"{k}={v}" for k, v in sorted(p["counts"].items()))])


def _report(costs, result, app, path: Path) -> None:
    import html
    from explorer.search.pick import Point
    from explorer.report.pareto import Baseline, front_svg

    data = result["json"]
    front = [Point(tuple(p["choice"]), p["memory_bytes"], {c: 1000.0 / ms for c, ms in p["ms"].items()})
             for p in data["fronts"][data["strategy"]]["points"]]
    marks = [Baseline(label, p["memory_bytes"], {c: 1000.0 / ms for c, ms in p["ms"].items()})
             for label, p in data["baselines"].items() if p]
    chosen = Point(tuple(result["chosen"]["choice"]), result["chosen"]["memory_bytes"],
                   {c: 1000.0 / ms for c, ms in result["chosen"]["ms"].items()})
    svg = front_svg(front, costs.cnns, app.memory, app.fps, marks, chosen)
    lines = "".join(f"<li>{html.escape(line)}</li>" for line in result["lines"])
    path.write_text(f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                    f"<title>primitives: {html.escape(app.name)}</title></head><body>"
                    f"<h1>Primitive selection (TASO ILP): {html.escape(app.name)}</h1><ul>{lines}</ul>"
                    f"<figure>{svg}</figure></body></html>\n")

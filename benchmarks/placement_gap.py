"""How far the offset heuristics are from optimal: TFLite's greedy-by-size, the multi-order
best fit (`offsets`, the default) and the exact MILP (HiGHS, explorer/memory/placement/milp.py) on
the worked example, Table 12 app 1 reuse-only and by parts, and seeded random interval sets
(sizes 1..1000, lifetimes on 40 steps), beside the live-bytes bound. Prints one line per
instance and the mean ratios to the MILP's arena.

    python benchmarks/placement_gap.py [--random 20] [--uses 30] [--seconds 10]
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.app.appfile import load_app  # noqa: E402
from explorer.plan.derive import derive, uniform_phases  # noqa: E402
from explorer.memory.lifetimes import EdgeUse  # noqa: E402
from explorer.memory.buffers import buffer_elements  # noqa: E402
from explorer.report.baselines import lower_bound  # noqa: E402
from explorer.memory.placement import conflict_graph, place  # noqa: E402
from explorer.memory.placement.milp import solve  # noqa: E402


def row(name: str, uses: list[EdgeUse], pipelines, seconds: float) -> tuple[int, int, int]:
    adj = conflict_graph(uses, pipelines)
    greedy = buffer_elements(place(uses, pipelines, "greedy-by-size"))
    best = place(uses, pipelines, "offsets")
    start = time.perf_counter()
    bound, _ = lower_bound(uses, pipelines)
    exact = solve([u.size for u in uses], adj, [b.offset for b in best], seconds, bound)
    took = time.perf_counter() - start
    fit = buffer_elements(best)
    print(f"{name:<34} uses {len(uses):>3}  bound {bound:>9}  greedy {greedy:>9}  "
          f"offsets {fit:>9}  milp {exact.arena:>9} ({'optimal' if exact.optimal else 'limit'}, "
          f"dual {exact.bound}, {took:.1f} s)")
    return greedy, fit, exact.arena


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--random", type=int, default=20)
    parser.add_argument("--uses", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    results = []
    for path, label in (("worked_example.yaml", "worked example"),
                        ("table12_app1_mobilenet_v2.yaml", "app 1 MobileNetV2")):
        app = load_app(ROOT / "apps" / path)
        for by_parts in (False, True):
            d = derive(app, uniform_phases(app, by_parts))
            results.append(row(f"{label} {'all parts' if by_parts else 'whole'}", d.uses,
                               app.pipelines, args.seconds))
    rng = random.Random(1)
    for k in range(args.random):
        uses = []
        for i in range(args.uses):
            a = rng.randrange(40)
            b = min(39, a + rng.randrange(1, 12))
            uses.append(EdgeUse(f"t{i}", "c", rng.randint(1, 1000), (("p", a, b),)))
        results.append(row(f"random {k}", uses, [["p"]], args.seconds))
    g = sum(r[0] / r[2] for r in results) / len(results)
    f = sum(r[1] / r[2] for r in results) / len(results)
    worst = max(r[1] / r[2] for r in results)
    print(f"mean arena / MILP arena: greedy-by-size {g:.4f}, offsets {f:.4f} (worst {worst:.4f}) "
          f"over {len(results)} instances")


if __name__ == "__main__":
    main()

"""One primitive-selection study of a cost model: the exact fronts of both memory strategies
(explorer/primitives/ilp.py), the time-only and memory-only points, TASO's greedy baseline at every
budget of the front (the paper's Fig. 10 speedups; started, as there, from the time-optimal
selection) and per layer (every layer's fastest primitive, "greedy, no budget"), the
paper's headline ratio (the least
memory within 15% of the time-only solution's time), the NSGA-II's hypervolume ratio to the
exact front (explorer/primitives/ga.py), and the plan chosen for the constraints. Shared by
`explore primitives` and benchmarks/primitives.py so both report the same figures.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

from explorer.primitives import ga as taso_ga, ilp as taso_ilp
from explorer.primitives.costs import STRATEGIES, CostModel
from explorer.app.units import format_bytes

SLACK = 1.15                      # the paper's "15% more time"


def _row(costs: CostModel, strategy: str, choice, seconds: float = 0.0) -> dict[str, Any]:
    ev = costs.evaluate(choice)
    counts = Counter(costs.options[i][p].name for i, p in enumerate(choice))
    return {"choice": list(choice), "time_ms": ev.time_ms, "ms": ev.ms,
            "memory_bytes": ev.memory[strategy], "weight_bytes": ev.weight_bytes,
            "workspace_bytes": ev.workspace_sum if strategy == "sum" else ev.workspace_max,
            "solver_s": seconds, "counts": dict(counts)}


def memory_only(costs: CostModel, strategy: str, cnn_ms=None, memory_budget=None):
    """Least memory (Eq. 14/15), then least time at that memory."""
    first = taso_ilp.solve(costs, "memory", strategy, memory_budget, None, cnn_ms)
    if first.choice is None:
        return None
    m = costs.evaluate(first.choice).memory[strategy]
    p = taso_ilp.lexicographic(costs, strategy, m, cnn_ms)
    if p is not None:
        p.seconds += first.seconds
    return p


def study(costs: CostModel, strategy: str = "sum", memory: int | None = None,
          cnn_ms: dict[str, float] | None = None, max_points: int = 200, seed: int = 0,
          ga_generations: int = 100, ga_population: int = 64) -> dict[str, Any]:
    fronts = {s: taso_ilp.front(costs, s, None, max_points) for s in STRATEGIES}
    front = fronts[strategy]
    fast = front.points[0]
    low = memory_only(costs, strategy)
    within = [p for p in front.points if p.time_ms <= fast.time_ms * SLACK]
    best = min(within, key=lambda p: p.memory_bytes)
    greedy_free = taso_ilp.greedy(costs, None, strategy)
    speedups = []
    for p in front.points:
        g = taso_ilp.greedy(costs, p.memory_bytes, strategy, start=fast.choice)
        speedups.append(None if g is None else costs.evaluate(g).time_ms / p.time_ms)
    ga = taso_ga.nsga2(costs, strategy, ga_population, ga_generations, seed)
    hv = taso_ga.hv_ratio([(t, m) for _, t, m in ga], [(p.time_ms, p.memory_bytes) for p in front.points])

    if cnn_ms:
        pick = memory_only(costs, strategy, cnn_ms, memory)
    elif memory is not None:
        pick = taso_ilp.lexicographic(costs, strategy, memory)
    else:
        pick = fast
    met = pick is not None
    pick = pick or low
    chosen = _row(costs, strategy, pick.choice, pick.seconds)
    data = {
        "strategy": strategy, "layers": [f"{c}.{l}" for c, l in costs.layers],
        "options": [[o.name for o in opts] for opts in costs.options],
        "fixed_bytes": costs.fixed_bytes,
        "fronts": {s: {"complete": f.complete, "seconds": f.seconds,
                       "max_budget_s": max((p.seconds for p in f.points), default=0.0),
                       "points": [_row(costs, s, p.choice, p.seconds) for p in f.points]}
                   for s, f in fronts.items()},
        "baselines": {"time-only (ILP)": _row(costs, strategy, fast.choice, fast.seconds),
                      "memory-only (ILP)": _row(costs, strategy, low.choice, low.seconds),
                      "greedy, no budget": _row(costs, strategy, greedy_free)},
        "greedy_speedups": speedups,      # paper's greedy (from the time-only ILP) / ILP
        "headline": {"time_only_ms": fast.time_ms, "time_only_bytes": fast.memory_bytes,
                     "point_ms": best.time_ms, "point_bytes": best.memory_bytes,
                     "memory_ratio": fast.memory_bytes / best.memory_bytes,
                     "time_ratio": best.time_ms / fast.time_ms},
        "ga": {"points": len(ga), "hv_ratio": hv, "generations": ga_generations,
               "population": ga_population, "seed": seed},
        "constraints": {"memory_bytes": memory, "ms": cnn_ms or {}},
        "chosen": chosen, "constraints_met": met,
    }
    g_ms = costs.evaluate(greedy_free).time_ms
    valid = [s for s in speedups if s is not None]
    lines = [
        f"layers {len(costs.layers)}, options {sum(len(o) for o in costs.options)}; "
        f"front ({strategy}) {len(front.points)} points{'' if front.complete else ' (truncated)'} "
        f"in {front.seconds:.2f} s, slowest budget {data['fronts'][strategy]['max_budget_s']:.3f} s",
        f"time-only {fast.time_ms:.3f} ms {format_bytes(fast.memory_bytes)}; memory-only "
        f"{low.time_ms:.3f} ms {format_bytes(low.memory_bytes)}; greedy (no budget) {g_ms:.3f} ms",
        f"within {SLACK:.2f}x time: {best.time_ms:.3f} ms {format_bytes(best.memory_bytes)} = "
        f"{fast.memory_bytes / best.memory_bytes:.2f}x less memory at "
        f"{best.time_ms / fast.time_ms:.3f}x time",
        f"ILP over the paper's greedy at the front's budgets: max {max(valid, default=float('nan')):.2f}x "
        f"({sum(s is None for s in speedups)} of {len(speedups)} budgets greedy cannot meet)",
        f"NSGA-II ({ga_population}x{ga_generations}) hypervolume / exact front: {hv:.4f}",
    ]
    return {"chosen": chosen, "met": met, "json": data, "lines": lines}

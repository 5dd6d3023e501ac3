"""Table 12 of the paper: the six applications at each memory constraint, our chosen plan's
memory and predicted fps beside the paper's "ours" column, with the ratios.

The NSGA-II front does not depend on M^c, so each app is searched once (the app's search
settings and seed, as `explore` would) and Algorithm 2's early exit and pick (lines 9-16)
are applied per constraint; `explore APP --mem X` gives the same plan. "min" is M^c = 0.

    .venv/bin/python benchmarks/table12.py [--apps 1,2] [--population N] [--generations N]
        [--placement offsets|shared-objects|greedy-by-size]
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.app.appfile import load_app  # noqa: E402
from explorer.plan.derive import Evaluation, gene_labels  # noqa: E402
from explorer.search.pick import Point, pick  # noqa: E402
from explorer.search.parallel import evaluation_pool  # noqa: E402
from explorer.search.algorithm2 import nsga2  # noqa: E402
from explorer.throughput.evaluator import make_evaluator  # noqa: E402

MB = 2 ** 20
SHARED = ROOT / "tests" / "data" / "paper"    # copies of ../shared/paper (tests/data/README.md)
APPS = {1: "table12_app1_mobilenet_v2", 2: "table12_app2_efficientnet_b0",
        3: "table12_app3_mobilenet_v2_pipelined", 4: "table12_app4_efficientnet_b0_pipelined",
        5: "table12_app5_multi_cnn_1", 6: "table12_app6_multi_cnn_2"}


def search_once(app, settings, evaluator_spec=None, quiet=True):
    """(reuse-only point, front, seconds, result) for `app`; the front is None when reuse
    alone fits every constraint asked later (decided by the caller)."""
    evaluate = Evaluation(app, make_evaluator(app, evaluator_spec))
    n = len(gene_labels(app))
    zeros = (0,) * n
    mem, fps = evaluate(zeros)
    reuse = Point(zeros, int(mem), dict(fps))
    start = time.perf_counter()
    result = None
    if n:
        with evaluation_pool(evaluate, settings.workers) as spread:   # same front, faster
            result = nsga2(n, list(app.cnns), spread, settings)
    return reuse, result, time.perf_counter() - start


def choose(reuse: Point, result, mem: int | None, fps: dict[str, float]) -> tuple[Point, bool, bool]:
    """Algorithm 2 for one constraint, with the paper's pick (the least memory meeting it):
    (point, constraints met, early exit)."""
    if mem is None or reuse.memory_bytes <= mem or result is None:
        return reuse, pick([reuse], mem, fps, "memory")[1], True
    point, met = pick(result.front, mem, fps, "memory")
    return point, met, False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--apps", default="1,2,3,4,5,6")
    parser.add_argument("--population", type=int)
    parser.add_argument("--generations", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--placement", default="offsets",
                        help="explorer.memory.placement planner (shared-objects: the paper's)")
    args = parser.parse_args()
    paper = yaml.safe_load((SHARED / "table12.yaml").read_text())["apps"]
    print(f"{'app':<28} {'M^c':>5} {'ours MB':>8} {'paper MB':>8} {'ratio':>6}  "
          f"{'fps ours / paper (ratio)':<44} {'search':>8}")
    for n in [int(x) for x in args.apps.split(",")]:
        app = load_app(ROOT / "apps" / f"{APPS[n]}.yaml")
        app.placement = args.placement
        s = app.search
        for key in ("population", "generations", "seed"):
            if getattr(args, key) is not None:
                s = replace(s, **{key: getattr(args, key)})
        ref = paper[n]
        reuse, result, seconds = search_once(app, s)
        evals = f"{result.evaluations / seconds:.0f} ev/s" if result else "-"
        for i, c in enumerate(ref["constraints"]):
            mem = 0 if c == "min" else int(c * MB)
            point, met, early = choose(reuse, result, mem, app.fps)
            ours_mb = point.memory_bytes / MB
            paper_mb = ref["memory"]["ours"][i]
            fps_ref = ref["fps"]
            cells = []
            for j, cnn in enumerate(app.cnns):
                theirs = (fps_ref["ours"][i] if "ours" in fps_ref else
                          list(fps_ref.values())[j]["ours"][i])
                ours = point.fps.get(cnn, 0.0)
                cells.append(f"{ours:.1f}/{theirs:g} ({ours / theirs:.2f})")
            label = f"{n} {ref['name']}"[:28]
            flag = "" if ours_mb <= paper_mb * 1.05 else "  > paper+5%"
            print(f"{label:<28} {str(c):>5} {ours_mb:8.2f} {paper_mb:8.2f} "
                  f"{ours_mb / paper_mb:6.3f}  {'; '.join(cells):<44} "
                  f"{'early exit' if early else f'{seconds:.0f} s'}{flag}")
        print(f"{'':<28} reuse only {reuse.memory_bytes / MB:.2f} MB; search {seconds:.1f} s, "
              f"{evals}, front {len(result.front) if result else 1} points, "
              f"least memory {min(p.memory_bytes for p in result.front) / MB if result else reuse.memory_bytes / MB:.2f} MB",
              flush=True)


if __name__ == "__main__":
    main()

"""One full search on Table 12's app 1 (MobileNetV2, fp32) with the app's default settings
(population 100, 60 generations, seed 1), as `explore apps/table12_app1_mobilenet_v2.yaml
--mem 0` runs it. Prints the time, evaluations per second, the front, and the least-memory
point's buffer bytes beside the all-by-parts plan's (every layer by parts is not the
minimum: by-parts residual joins hold skewed rows). Target: under 60 s on the dev box (the
authors' GA needs about 3 minutes).

With `--granularity ladder` the genes are rows per phase (explorer.plan.genes); the target
for that search is under 30 s.

    .venv/bin/python benchmarks/search_app1.py [--app apps/...yaml] [--seed N]
        [--granularity binary|ladder] [--workers N] [--relink-rounds N] [--local-rounds N] [--quiet]
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.app.appfile import load_app  # noqa: E402
from explorer.plan.derive import Evaluation, derive, gene_labels, uniform_phases  # noqa: E402
from explorer.plan.genes import gene_space  # noqa: E402
from explorer.search.parallel import resolve_workers  # noqa: E402
from explorer.search.algorithm2 import algorithm2, stderr_progress  # noqa: E402
from explorer.throughput.evaluator import make_evaluator  # noqa: E402

MB = 2 ** 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", default=str(ROOT / "apps" / "table12_app1_mobilenet_v2.yaml"))
    parser.add_argument("--seed", type=int)
    parser.add_argument("--placement", default="offsets",
                        help="explorer.memory.placement planner (shared-objects: the paper's)")
    parser.add_argument("--granularity", choices=["binary", "ladder"])
    parser.add_argument("--workers", type=int, help="processes evaluating (0 = one per CPU)")
    parser.add_argument("--relink-rounds", type=int, help="path relinking rounds")
    parser.add_argument("--local-rounds", type=int, help="Pareto local search rounds")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    app = load_app(args.app, mem="0")
    app.placement = args.placement
    settings = app.search if args.seed is None else replace(app.search, seed=args.seed)
    if args.granularity:
        settings = replace(settings, granularity=args.granularity)
    for key in ("workers", "relink_rounds", "local_rounds"):
        if getattr(args, key) is not None:
            settings = replace(settings, **{key: getattr(args, key)})
    start = time.perf_counter()
    evaluate = Evaluation(app, make_evaluator(app), space=gene_space(app, settings.granularity))
    outcome = algorithm2(app, evaluate, settings, None if args.quiet else stderr_progress)
    wall = time.perf_counter() - start
    r = outcome.result
    print(f"{app.name}: {len(gene_labels(app))} {settings.granularity} genes, "
          f"population {settings.population}, {resolve_workers(settings.workers)} worker(s), "
          f"{settings.generations} generations, seed {settings.seed}")
    print(f"search: {wall:.1f} s, {r.evaluations} evaluations ({r.unique} unique): "
          f"{r.evaluations / r.seconds:.0f} evaluations/s, {r.unique / r.seconds:.0f} derivations/s")
    print(f"front: {len(outcome.front)} points, memory {outcome.front[0].memory_bytes / MB:.3f}"
          f" .. {outcome.front[-1].memory_bytes / MB:.3f} MB")
    least = derive(app, evaluate.phases(outcome.front[0].genes))
    every = derive(app, uniform_phases(app, True))
    whole = derive(app, uniform_phases(app, False))
    by_parts = sum(1 for g in outcome.front[0].genes if g)
    print(f"least-memory point: {least.memory_bytes / MB:.3f} MB, buffers {least.buffer_bytes} B "
          f"({by_parts} of {len(outcome.genes)} layers by parts), "
          f"fps {', '.join(f'{c} {v:.1f}' for c, v in outcome.front[0].fps.items())}")
    print(f"all layers by parts: {every.memory_bytes / MB:.3f} MB, buffers {every.buffer_bytes} B "
          f"-> least-memory point uses {every.buffer_bytes - least.buffer_bytes} B "
          f"({1 - least.buffer_bytes / every.buffer_bytes:.1%}) fewer buffer bytes")
    print(f"reuse only (no parts): {whole.memory_bytes / MB:.3f} MB, buffers {whole.buffer_bytes} B")
    print(f"{'within' if wall <= 60 else 'OVER'} the 60 s target")


if __name__ == "__main__":
    main()

"""The search on a Dask cluster against the local process pool: app 1
(MobileNetV2) searched with the same settings and seed by two forked workers
(explorer/search/parallel.py) and by a scheduler with two workers, each its own process
(explorer/search/cluster.py local_processes),
each run timed in this process; prints both times, their ratio and whether the fronts are
equal.

    PYTHONPATH=$PWD python benchmarks/cluster_speed.py [--population 32 --generations 10]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.app.appfile import load_app  # noqa: E402
from explorer.plan.derive import Evaluation  # noqa: E402
from explorer.plan.genes import gene_space  # noqa: E402
from explorer.search.algorithm2 import algorithm2  # noqa: E402
from explorer.throughput.evaluator import make_evaluator  # noqa: E402


def search(app, settings):
    evaluation = Evaluation(app, make_evaluator(app), space=gene_space(app, settings.granularity))
    start = time.perf_counter()
    outcome = algorithm2(app, evaluation, settings)
    return time.perf_counter() - start, [(p.genes, p.memory_bytes) for p in outcome.front], outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--app", default=str(ROOT / "apps" / "table12_app1_mobilenet_v2.yaml"))
    parser.add_argument("--population", type=int, default=32)
    parser.add_argument("--generations", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    from explorer.search.cluster import local_processes
    app = load_app(args.app, mem="0")
    base = replace(app.search, population=args.population, generations=args.generations)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    pool_s, pool_front, outcome = search(app, replace(base, workers=args.workers))
    with local_processes(args.workers) as address:
        cluster_s, cluster_front, _ = search(app, replace(base, cluster=address))
    print(f"{outcome.result.unique} distinct chromosomes evaluated")
    print(f"local pool, {args.workers} workers: {pool_s:.1f} s")
    print(f"Dask scheduler + {args.workers} worker processes: {cluster_s:.1f} s")
    print(f"cluster / pool: {cluster_s / pool_s:.2f}x; fronts equal: {cluster_front == pool_front}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

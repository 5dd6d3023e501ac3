"""Derivations per second: one chromosome -> schedules, row lifetimes, offsets, memory (the
search's inner step, explorer.plan.derive.Evaluation), for random binary and ladder
chromosomes of zoo CNNs, with the row-placement fast path (explorer/memory/placement/rows.py)
and without it (FAST = False: the plain pair-by-pair scan; the same offsets).

    PYTHONPATH=$PWD python benchmarks/derive_speed.py [--nets mobilenet_v2,resnet50] [--seconds 6]

Chromosomes: each gene by parts with probability 0.5 (binary) or 0.4 at a random ladder step,
as a search's population mostly is; each network's first chromosome (all whole) is derived
before the clock starts (its analyses are per-CNN caches any search fills at once).
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.app.appfile import load_app  # noqa: E402
from explorer.plan.derive import Evaluation  # noqa: E402
from explorer.plan.genes import gene_space  # noqa: E402
from explorer.throughput.evaluator import make_evaluator  # noqa: E402
import explorer.memory.placement.rows as rows  # noqa: E402

NETS = ("mobilenet_v2", "resnet50", "inception_v2", "efficientnet_b0", "yolov2_16",
        "densenet121", "densenet121_tv")


def chromosomes(evaluation: Evaluation, granularity: str, rnd: random.Random):
    """An endless stream of random chromosomes for `granularity`."""
    if granularity == "binary":
        while True:
            yield tuple(int(rnd.random() < 0.5) for _ in evaluation.where)
    upper = evaluation.space.upper
    while True:
        yield tuple(rnd.randint(1, u) if u and rnd.random() < 0.4 else 0 for u in upper)


def rate(app, granularity: str, fast: bool, seconds: float, seed: int) -> tuple[float, int]:
    """(seconds per derivation, derivations timed) within about `seconds`."""
    rows.FAST = fast
    space = gene_space(app, "ladder") if granularity == "ladder" else None
    evaluation = Evaluation(app, make_evaluator(app), space=space)
    stream = chromosomes(evaluation, granularity, random.Random(seed))
    evaluation(tuple(0 for _ in (space.upper if space else evaluation.where)))
    start, done = time.perf_counter(), 0
    while done < 3 or (time.perf_counter() - start < seconds and done < 200):
        evaluation(next(stream))
        done += 1
    return (time.perf_counter() - start) / done, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default=",".join(NETS))
    parser.add_argument("--seconds", type=float, default=6.0, help="per case (at least 3 runs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-plain", action="store_true", help="skip the FAST = False column")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'network':16} {'layers':>6} {'edges':>6} {'genes':>5} {'granularity':>11} "
          f"{'s/derivation':>12} {'per s':>7} {'plain s':>8} {'x':>5}")
    with tempfile.TemporaryDirectory() as tmp:
        for net in args.nets.split(","):
            path = Path(tmp) / f"{net}.yaml"
            path.write_text(f"name: {net}\ncnns:\n  - {{name: net, model: 'zoo:{net}'}}\n")
            app = load_app(path, mem="0")
            cnn = app.cnns["net"]
            for granularity in ("binary", "ladder"):
                fast, n = rate(app, granularity, True, args.seconds, args.seed)
                plain = None if args.no_plain else rate(app, granularity, False, args.seconds,
                                                        args.seed)[0]
                print(f"{net:16} {len(cnn.order()):6d} {len(cnn.edges()):6d} "
                      f"{len(Evaluation(app, None).where):5d} {granularity:>11} {fast:12.4f} "
                      f"{1 / fast:7.1f} " + ("" if plain is None else
                                              f"{plain:8.4f} {plain / fast:5.2f}"), flush=True)
    rows.FAST = True
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

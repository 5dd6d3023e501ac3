"""The search side of granularity genes, without deployments: Algorithm 2 with
ladder genes and with the paper's binary genes on each CNN, least memory asked, and the two
fronts compared.

    flock /tmp/memtrade-heavy.lock python benchmarks/granularity_fronts.py
        [--cnns mobilenet_v2,resnet50] [--evaluator SPEC] [--population N] [--generations N]
        [--seed N] [--relink-rounds N] [--local-rounds N] [--no-seeds]

Per CNN (one partition, fp32, the app defaults: population 100, 60 generations, seed 1):
the least memory each search found (the target: ladder no worse than binary), and the
front's distinct points between the reuse-only plan's memory and the least memory, counted
as distinct memory values (benchmarks/granularity.py's count) and as distinct (memory, fps)
points; the ratio ladder / binary (the target is >= 3). `--evaluator` is as
`explore --evaluator` (default: the app's jetson-tx2 profile; a measured profile file, e.g.
one `explore profile` wrote, gives the fps benchmarks/granularity.py uses). The ladder
search is explorer.search.algorithm2.ladder_search (the binary search first, then NSGA-II over ladder
genes seeded with its front and explorer.plan.genes.GeneSpace.seeds); `--no-seeds` runs the
plain NSGA-II over ladder genes instead, for comparison. Searches' times include the binary
stage.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from explorer.app.appfile import load_app  # noqa: E402
from explorer.plan.derive import Evaluation  # noqa: E402
from explorer.plan.genes import gene_space  # noqa: E402
from explorer.search.algorithm2 import algorithm2  # noqa: E402
from explorer.throughput.evaluator import make_evaluator  # noqa: E402

MB = 2 ** 20


def between(front, low: int, high: int) -> tuple[int, int]:
    """Distinct memory values and distinct (memory, fps) points with low <= memory <= high."""
    inside = [p for p in front if low <= p.memory_bytes <= high]
    return (len({p.memory_bytes for p in inside}),
            len({(p.memory_bytes, tuple(sorted(p.fps.items()))) for p in inside}))


def run_cnn(name: str, args, folder: Path) -> None:
    path = folder / f"{name}.yaml"
    path.write_text(f"name: fronts-{name}\nplatform: jetson-tx2\nprecision: fp32\n"
                    f"cnns:\n  - name: {name}\n    model: zoo:{name}\n    fps: 0\n")
    app = load_app(path, mem="0")
    evaluator = make_evaluator(app, args.evaluator)
    settings = app.search
    for key in ("population", "generations", "seed", "relink_rounds", "local_rounds"):
        if getattr(args, key) is not None:
            settings = replace(settings, **{key: getattr(args, key)})
    found = {}
    for gran in ("ladder", "binary"):
        ev = Evaluation(app, evaluator, space=gene_space(app, gran))
        start = time.perf_counter()
        out = algorithm2(app, ev, replace(settings, granularity=gran), seeded=not args.no_seeds)
        found[gran] = (out, time.perf_counter() - start, ev)
    reuse_mem, _ = found["ladder"][2](tuple([0] * len(found["ladder"][0].genes)))
    print(f"\n{name}: population {settings.population}, {settings.generations} generations, "
          f"seed {settings.seed}, evaluator {args.evaluator or 'jetson-tx2'}"
          f"{', no extra seeds' if args.no_seeds else ''}; reuse only {reuse_mem / MB:.3f} MB")
    print(f"{'genes':8} {'least MB':>9} {'front':>6} {'mem values':>11} {'points':>7} "
          f"{'unique':>7} {'search s':>9}")
    counts = {}
    for gran, (out, secs, _) in found.items():
        least = out.front[0].memory_bytes
        counts[gran] = between(out.front, least, reuse_mem)
        print(f"{gran:8} {least / MB:9.3f} {len(out.front):6} {counts[gran][0]:11} "
              f"{counts[gran][1]:7} {out.result.unique:7} {secs:9.1f}")
    lad, bin_ = found["ladder"][0].front[0].memory_bytes, found["binary"][0].front[0].memory_bytes
    print(f"least memory ladder {'<=' if lad <= bin_ else '>'} binary "
          f"({lad / MB:.3f} vs {bin_ / MB:.3f} MB); between reuse-only and least memory: "
          f"{counts['ladder'][0] / max(1, counts['binary'][0]):.2f}x memory values, "
          f"{counts['ladder'][1] / max(1, counts['binary'][1]):.2f}x points")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cnns", default="mobilenet_v2,resnet50")
    parser.add_argument("--evaluator", default=None)
    parser.add_argument("--population", type=int)
    parser.add_argument("--generations", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--relink-rounds", type=int)
    parser.add_argument("--local-rounds", type=int)
    parser.add_argument("--no-seeds", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cnns.split(","):
            run_cnn(name.strip(), args, Path(tmp))


if __name__ == "__main__":
    main()

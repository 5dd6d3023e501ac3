"""`explore APP.yaml [--mem 8MB] [--fps 71 | --fps name=71,...] [--out DIR]`: the methodology,
memtrade.explore (memtrade/exploration.py), then the files of DIR that Exploration.write
writes (memtrade/front_files.py): pareto.json, pareto.csv, plan.json (the chosen point),
report.html and the SDF3 XML of every partition of the chosen plan.
Exit 0 when the chosen plan meets M^c and every T^c, 3 when no point of the front does
(the least-memory plan is still written). Without --out, DIR is runs/<name>-<n> under the
current directory: <name> the app's name made a safe directory name (explorer.report.outputs.
safe_name), n the first number not taken. DIR is claimed before the search and written
through a temporary sibling (explorer.report.outputs), so a failed or interrupted run leaves none.
"""
from __future__ import annotations

import argparse
import sys

from explorer.report.outputs import Staged, claim_dir, claim_new_dir, safe_name


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", help="application file (YAML)")
    parser.add_argument("--mem", help="memory constraint M^c, e.g. 8MB (0 = least memory)")
    parser.add_argument("--fps", help="throughput constraint T^c: one value for every CNN, or "
                                      "name=value,... (0 = none)")
    parser.add_argument("--precision", choices=["fp32", "fp16", "mixed", "int8", "auto"],
                        help="override the app's precision (auto: each layer's searched)")
    parser.add_argument("--min-sqnr", type=float, dest="min_sqnr", metavar="DB",
                        help="precision auto: the output's least SQNR against fp32, dB "
                             "(overrides the app's min_sqnr_db)")
    parser.add_argument("--calibration", metavar="FRAMES",
                        help="precision auto: .npy/.npz frames of input the per-layer sensitivity "
                             "table is measured on (as explore deploy --calibration reads them)")
    parser.add_argument("--calibration-method", dest="calibration_method",
                        choices=["minmax", "entropy", "percentile"],
                        help="precision auto: int8 scales of the sensitivity table (default minmax)")
    parser.add_argument("--evaluator", default=None,
                        help="throughput evaluator: profile (default), measured, a built-in "
                             "profile name or a profile file")
    parser.add_argument("--out", help="output directory (default: runs/<app name>-<n>)")
    parser.add_argument("--force", action="store_true", help="write into a non-empty --out")
    parser.add_argument("--seed", type=int, help="random seed (default: the app's search.seed)")
    parser.add_argument("--population", type=int, help="NSGA-II population (app's default)")
    parser.add_argument("--generations", type=int, help="NSGA-II generations (app's default)")
    parser.add_argument("--workers", type=int,
                        help="processes evaluating chromosomes (0 = one per CPU, the default; "
                             "results do not depend on it)")
    parser.add_argument("--relink-rounds", type=int, dest="relink_rounds",
                        help="rounds of path relinking between neighbouring front points after "
                             "a ladder search (explorer/search/path_relinking.py; default: the app's, 16)")
    parser.add_argument("--local-rounds", type=int, dest="local_rounds",
                        help="rounds of Pareto local search toward whole layers after the "
                             "relinking (explorer/search/local_search.py; default: the app's, 1)")
    parser.add_argument("--effort", choices=["auto", "full"],
                        help="auto (default): population, generations and relinking rounds you "
                             "did not set scaled to the network's measured evaluation rate, all "
                             "stages fitted to 70%% of the time budget (explorer/search/effort.py); "
                             "full: the defaults as they are, no time budget unless --time-limit")
    parser.add_argument("--granularity", choices=["ladder", "binary"],
                        help="genes: rows per phase from a ladder, or the paper's binary "
                             "whole/row-by-row (default: the app's search.granularity, ladder)")
    parser.add_argument("--tiling", choices=["parts", "tiles", "both"],
                        help="fused tiling of layer groups (MAFAT / DeepThings, docs/tiling.md): "
                             "search tiled groups alone (tiles) or with the per-layer genes (both: "
                             "after the parts and tiles searches, seeded with their fronts); "
                             "parts = the tiling search space without tiling genes")
    parser.add_argument("--prefer", choices=["memory", "fps"],
                        help="which point of the front: the least memory or the highest "
                             "throughput meeting the constraints (default: the fastest within "
                             "--mem when it is the only constraint, else the least memory; "
                             "docs/search.md)")
    parser.add_argument("--time-limit", type=float, dest="time_limit",
                        help="seconds for the whole run: every stage of the search stops with "
                             "the front found so far and every output is written (default: the "
                             "app's search.time_limit, else 100 with --effort auto, none with "
                             "--effort full)")
    parser.add_argument("--cluster", metavar="ADDRESS",
                        help="evaluate chromosomes on the Dask cluster whose scheduler is at "
                             "ADDRESS, e.g. tcp://host:8786 (same front as one process; "
                             "docs/search.md)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    from explorer.cli.baselines import add_placement
    add_placement(parser)


def out_dir(args: argparse.Namespace, app_name: str) -> Staged:
    """The directory to write, claimed before the search runs."""
    if args.out:
        return claim_dir(args.out, args.force)
    return claim_new_dir("runs", safe_name(app_name))


def run(args: argparse.Namespace) -> int:
    started = getattr(args, "started", None)       # explorer.cli.main: the run's clock start
    import memtrade
    from explorer.search.progress import stderr_progress
    from memtrade.front_files import stages_line, write_files
    from memtrade.settings import cli_flag

    staged = claim_dir(args.out, args.force) if args.out else None   # before any work
    try:
        app = memtrade.load_app(args.app, mem=args.mem, fps=args.fps, precision=args.precision,
                                prefer=args.prefer)
        staged = staged or out_dir(args, app.name)
    except BaseException:
        if staged is not None:
            staged.discard()
        raise
    say = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    with staged as out:
        found = memtrade.explore(
            app, time_limit=args.time_limit, effort=args.effort, cluster=args.cluster,
            progress=None if args.quiet else stderr_progress, evaluator=args.evaluator,
            granularity=args.granularity, tiling=args.tiling, placement=args.placement,
            seed=args.seed, population=args.population, generations=args.generations,
            workers=args.workers, relink_rounds=args.relink_rounds,
            local_rounds=args.local_rounds, say=say, started=started,
            calibration=args.calibration, calibration_method=args.calibration_method,
            min_sqnr=args.min_sqnr, _flag=cli_flag)
        written, outputs_s = write_files(found, out, staged.final)
    for line in found.summary() + [stages_line(found, outputs_s)]:
        print(line)
    xml = [p.name for p in written if p.suffix == ".xml"]
    print(f"wrote {staged.final}/: plan.json, pareto.json, pareto.csv, report.html, " + ", ".join(xml))
    return 0 if found.met else 3

"""`explore profile APP.yaml --backend onnxruntime [--out FILE] [--threads N] [--layout L]`:
measure every layer of the app's CNNs whole and in parts of every k of the granularity ladder
on this machine, inside deployments run as `explore run` runs them (deploy/profile/ladder.py), and write a device profile (explorer/
device_profile.py's measured format) for `explore APP.yaml --evaluator FILE`. TensorRT
profiles are measured on the board: `python3 board_runner.py profile DIR` there."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from deploy.backends import registry
    parser.add_argument("app", help="application YAML")
    parser.add_argument("--backend", choices=registry.names(), default=registry.DEFAULT)
    parser.add_argument("--out", default=None, help="profile file to write (.yaml or .json); "
                        "default: profile-<app>-onnxruntime.yaml in the current directory")
    parser.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per layer (median)")
    parser.add_argument("--threads", type=int, default=0,
                        help="ONNX Runtime intra-op threads (as `explore run --threads`)")
    parser.add_argument("--steps", choices=["regions", "layers"], default="regions",
                        help="time deployments as `explore deploy --steps` makes them (default "
                             "regions: a band of firings by parts is one call, its time shared "
                             "among its layers by their work)")
    parser.add_argument("--layout", choices=["blocked", "auto", "nchwc", "nchw"], default="blocked",
                        help="ONNX Runtime storage and kernels, as `explore run --layout` "
                             "(default blocked, explore run's default)")
    parser.add_argument("--frames", type=int, default=10,
                        help="frames per ladder deployment (median per layer; default 10)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="time every ladder deployment this many times, round after round, "
                        "and keep each layer's least median (a shared machine; default 1)")
    parser.add_argument("--precision", default=None, help="override the app's precision")
    parser.add_argument("--primitives", action="store_true",
                        help="also time every whole layer with every primitive that computes it, "
                        "its measured workspace and the layout transitions (docs/primitives.md)")


def run(args: argparse.Namespace) -> int:
    from deploy.backends import registry
    from explorer.report.outputs import claim_file
    from sdf3.errors import InputError

    if not registry.backend(args.backend).capabilities.profiles_here:
        raise InputError("--backend tensorrt: TensorRT layer times are measured on the target; "
                         "deploy with `explore deploy PLAN --backend tensorrt --with-profile` and "
                         "run `python3 board_runner.py profile DIR` there (docs/deploy.md)")
    if args.repeats < 1:
        raise InputError(f"--repeats: expected a positive number, got {args.repeats}")
    # checked and claimed before any work; written to a temporary sibling, renamed at the end
    staged = claim_file(args.out or f"profile-{Path(args.app).stem}-onnxruntime.yaml", args.force)
    with staged as tmp:
        return _profile(args, tmp, staged.final)


def _profile(args: argparse.Namespace, tmp: Path, out: Path) -> int:
    import memtrade
    from explorer.cli.run import check_threads
    from explorer.throughput.device_profile import save_profile
    from memtrade.platform import LivePrinter

    app = memtrade.load_app(args.app, precision=args.precision)
    check_threads(args.threads)
    with LivePrinter(sys.stderr) as printer:
        profile = memtrade.profile(app, threads=args.threads, repeats=args.repeats,
                                   layout=args.layout, steps=args.steps, frames=args.frames,
                                   rounds=args.rounds, primitives=args.primitives, say=printer)
    save_profile(profile, tmp)
    total = {n: sum(t.whole_ms for t in table.values()) for n, table in profile.models.items()}
    print(f"wrote {out}: " + ", ".join(f"{n} {ms:.2f} ms whole" for n, ms in total.items()))
    return 0

"""`explore deploy PLAN.json --backend onnxruntime|tensorrt --out DIR`: the final application
from a plan (paper Section 7), memtrade.deploy (memtrade/deployment.py): step models, arena
placement, resolved schedules, and for TensorRT the engines built from the same ONNX parts.
--out is checked and claimed before any work and written through a temporary sibling, so a
failed deploy leaves nothing behind."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from deploy.backends import registry
    from deploy.quant import methods
    parser.add_argument("plan", help="plan.json written by `explore APP.yaml`")
    parser.add_argument("--backend", choices=registry.names(), default=registry.DEFAULT)
    parser.add_argument("--out", required=True, help="directory for the deployment")
    parser.add_argument("--force", action="store_true", help="write into a non-empty --out")
    parser.add_argument("--steps", choices=["regions", "layers"], default="regions",
                        help="regions (default): consecutive firings by parts run as one call per "
                             "band (deploy/build/regions.py); layers: one call per layer and phase")
    parser.add_argument("--point", type=int, default=None,
                        help="deploy point N of the Pareto front (pareto.json beside PLAN.json, "
                             "or given instead of it; N as in report.html's point column) "
                             "instead of the chosen plan")
    parser.add_argument("--calibration", type=Path, default=None,
                        help="int8 plans: frames of real input (.npy or .npz, [F, N, C, H, W] or "
                             "[F, C, H, W]) the tensors' scales are calibrated on (default: "
                             "generated frames, with a warning; a QDQ model uses its own)")
    parser.add_argument("--calibration-method", choices=methods.names(), default=None,
                        help="int8 plans: ONNX Runtime's calibrator that finds each tensor's "
                             "range (default minmax; docs/precision.md)")
    parser.add_argument("--with-profile", action="store_true",
                        help="also write every layer's whole and part model, for "
                             "`board_runner.py profile` on the target")


def run(args: argparse.Namespace) -> int:
    import memtrade
    dep = memtrade.deploy(args.plan, args.out, args.backend, args.calibration, steps=args.steps,
                          point=args.point, force=args.force, with_profile=args.with_profile,
                          calibration_method=args.calibration_method,
                          warn=lambda line: print(f"explore deploy: warning: {line}", file=sys.stderr))
    print(f"deployed {dep.name}: {dep.models} step models, {dep.steps} steps, arena "
          f"{dep.arena_bytes} B (device {dep.device_arena_bytes} B) -> {args.out}")
    for line in dep.notes:
        print(line)
    return 0

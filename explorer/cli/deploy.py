"""`explore deploy PLAN.json --backend onnxruntime|tensorrt --out DIR`: the final application
from a plan (paper Section 7): step models, arena placement, resolved schedules, and for
TensorRT the engines built from the same ONNX parts."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from explorer.plan.model import Plan


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plan", help="plan.json written by `explore APP.yaml`")
    parser.add_argument("--backend", choices=["onnxruntime", "tensorrt"], default="onnxruntime")
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
    parser.add_argument("--with-profile", action="store_true",
                        help="also write every layer's whole and part model, for "
                             "`board_runner.py profile` on the target")


def unmet_constraints(plan: Plan) -> str:
    """Which of the plan's constraints it misses, in words ("" when met or none)."""
    if plan.constraints_met:
        return ""
    out = []
    mem = plan.constraints.memory_bytes
    if mem is not None and plan.memory_bytes > mem:
        out.append(f"memory {plan.memory_bytes} B > {mem} B")
    for cnn, want in plan.constraints.fps.items():
        got = plan.fps.get(cnn)
        if want and got is not None and got < want:
            out.append(f"{cnn} {got:.1f} fps < {want:g} fps")
    return ", ".join(out) or "constraints_met is false"


def run(args: argparse.Namespace) -> int:
    from explorer.report.outputs import claim_dir

    # --out is checked and claimed before any work; the deployment is written to a temporary
    # sibling that replaces it at the end, so a failed deploy leaves nothing behind
    with claim_dir(args.out, args.force) as out:
        return _deploy(args, out)


def _deploy(args: argparse.Namespace, out: Path) -> int:
    from deploy.build.derive import check_backend, derive
    from explorer.app.appfile import load_app
    from explorer.plan.plan_file import from_json

    if args.point is not None:
        from explorer.cli.front_point import plan_of_point
        plan = plan_of_point(args.plan, args.point)
    else:
        plan = from_json(args.plan)
    unmet = unmet_constraints(plan)
    if unmet:
        print(f"explore deploy: warning: plan {args.plan} does not meet its constraints ({unmet}); "
              f"deploying it anyway", file=sys.stderr)
    app = load_app(plan.app)
    check_backend(plan, args.backend, args.plan)
    scales = None
    if plan.data_bytes == 1:
        from deploy.build.quantization import deployment_scales
        scales = deployment_scales(app.cnns, args.calibration,
                                   lambda line: print(f"explore deploy: warning: {line}", file=sys.stderr))
    elif args.calibration is not None:
        print(f"explore deploy: warning: --calibration is for int8 plans; plan {args.plan} is "
              f"{plan.precision}: ignored", file=sys.stderr)
    manifest = derive(plan, app.cnns, out, args.backend, args.with_profile, where=args.plan,
                      regions=args.steps == "regions", scales=scales)
    steps = sum(len(p.steps) for p in manifest.partitions)
    print(f"deployed {manifest.name or Path(args.plan).stem}: {len(manifest.models)} step models, "
          f"{steps} steps, arena {manifest.arena_bytes} B "
          f"(device {manifest.device_arena_bytes} B) -> {args.out}")
    from deploy.backends import registry
    for line in registry.backend(args.backend).after_derive(out, manifest):
        print(line)
    return 0

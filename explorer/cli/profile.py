"""`explore profile APP.yaml --backend onnxruntime [--out FILE] [--threads N] [--layout L]`:
measure every layer of the app's CNNs whole and in parts of every k of the granularity ladder
on this machine, inside deployments run as `explore run` runs them (deploy/profile/ladder.py), and write a device profile (explorer/
device_profile.py's measured format) for `explore APP.yaml --evaluator FILE`. TensorRT
profiles are measured on the board: `python3 board_runner.py profile DIR` there."""
from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", help="application YAML")
    parser.add_argument("--backend", choices=["onnxruntime", "tensorrt"], default="onnxruntime")
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
    from explorer.report.outputs import claim_file
    from sdf3.errors import InputError

    if args.backend == "tensorrt":
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
    from deploy.profile.ladder import ladder_rows, profile_ladder
    from deploy.profile.layers import profile_cnn
    from explorer.app.appfile import load_app
    from explorer.throughput.device_profile import DeviceProfile, save_profile
    from explorer.throughput.layer_times import from_flat
    from sdf3.errors import InputError

    app = load_app(args.app, precision=args.precision)
    if app.precision.data_bytes not in (2, 4):
        raise InputError(f"{args.app}: precision {app.precision.name} cannot run on ONNX Runtime "
                         "CPU here (fp32 or fp16 data only)")
    dtype = "float32" if app.precision.data_bytes == 4 else "float16"
    if args.frames < 1:
        raise InputError(f"--frames: expected a positive number, got {args.frames}")
    from explorer.cli.run import check_threads
    check_threads(args.threads)
    if args.rounds < 1:
        raise InputError(f"--rounds: expected a positive number, got {args.rounds}")
    models, prims, rungs, runs = {}, {}, {}, {}
    for name, cnn in app.cnns.items():
        print(f"profiling {name}: {len(cnn.graph)} layers", file=sys.stderr)
        table = profile_cnn(cnn, dtype, args.repeats, args.threads)
        # the times the evaluator uses: every layer where it runs, in deployments whole and
        # in parts of every k of the ladder, layout and threads as `explore run`
        runs[name] = []
        ladder = profile_ladder(cnn, app.precision.name, args.frames, args.threads, args.layout,
                                lambda label, ms: print(f"  {label}: {ms:.2f} ms/frame",
                                                        file=sys.stderr), runs[name],
                                args.rounds, args.steps == "regions")
        # whole layers' bytes as the ladder's whole deployment runs them, where it measured
        models[name] = {layer: from_flat(ladder.get(layer, {}).get("whole_ms", t["whole_ms"]),
                                         part_ms=t.get("part_ms"), phases=t.get("phases"),
                                         whole_ws_bytes=ladder.get(layer, {}).get(
                                             "whole_ws_bytes", t.get("whole_ws_bytes")),
                                         part_ws_bytes=t.get("part_ws_bytes"),
                                         whole_session_bytes=ladder.get(layer, {}).get(
                                             "whole_session_bytes", t.get("whole_session_bytes")),
                                         part_session_bytes=t.get("part_session_bytes"),
                                         beside_ms=ladder.get(layer, {}).get("beside_ms"),
                                         **{key: ladder.get(layer, {}).get(key)
                                            for key in ("beside_session_bytes", "beside_ws_bytes",
                                                        "call_bytes")},
                                         **{key: ladder.get(layer, {}).get(key, {})
                                            for key in ("by_phases", "region", "alone",
                                                        "band_session_bytes", "band_ws_bytes",
                                                        "alone_session_bytes", "alone_ws_bytes")})
                        for layer, t in table.items()}
        rungs[name] = ladder_rows(cnn)
        if args.primitives:
            from deploy.profile.primitives import profile_primitives
            prims[name] = profile_primitives(cnn, dtype, args.repeats, args.threads)
    profile = DeviceProfile(
        name=f"{platform.node()}-onnxruntime", models=models, precision=app.precision.name,
        meta={"backend": "onnxruntime", "device": platform.processor() or platform.machine(),
              "threads": args.threads, "repeats": args.repeats, "layout": args.layout,
              "steps": args.steps,
              "frames": args.frames, "rounds": args.rounds, "ladder_rows": rungs,
              "ladder_runs": runs,
              "how": "whole_ms and by_phases {phases: ms per frame}: median over frames of "
                     "the layer's calls (the least over rounds) in deployments whole and in "
                     "parts of every k of ladder_rows (explore run's layout and threads); "
                     "region: parameters of the layer's by-parts region there; alone: the "
                     "same with every neighbour whole; beside_ms: median time whole beside "
                     "a layer in parts; ladder_runs: each "
                     "deployment's median frame beside its layers' sum; part_ms is one "
                     "interior phase timed alone (explore profile)"},
        primitives=prims)
    save_profile(profile, tmp)
    total = {n: sum(t.whole_ms for t in table.values()) for n, table in models.items()}
    print(f"wrote {out}: " + ", ".join(f"{n} {ms:.2f} ms whole" for n, ms in total.items()))
    return 0

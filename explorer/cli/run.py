"""`explore run DIR [--frames N] [--json]`: run a deployment on seeded random frames and
report what was measured: fps per CNN, arena and parameter bytes, calls per frame, peak RSS,
the footprint (peak - the RSS before loading) with its breakdown beside the plan's memory,
and the largest difference to a plain ONNX Runtime session on the original model, with a
PASS/FAIL verdict per CNN (deploy/run/verdict.py); exit status 4 when a CNN fails. The
figures and the command's settings are also written to DIR/run.json and DIR/run.html."""
from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="directory written by `explore deploy`")
    # numbers are read by run() (whole_number), so `--threads x` is one line like `-1`
    parser.add_argument("--frames", default=20, help="frames to run (default 20)")
    parser.add_argument("--seed", default=0)
    parser.add_argument("--threads", default=0,
                        help="ONNX Runtime intra-op threads per session (0: one per core)")
    parser.add_argument("--backend", choices=["onnxruntime", "tensorrt"], default=None,
                        help="override the manifest's backend")
    parser.add_argument("--no-check", action="store_true", help="skip the reference comparison")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--layout", choices=["blocked", "auto", "nchwc", "nchw"], default="blocked",
                        help="ONNX Runtime storage and kernels: blocked (whole-layer tensors in "
                             "ORT's NCHWc layout where both ends allow, other steps as auto), "
                             "auto (per step the faster of NCHWc with reorders and plain NCHW), "
                             "or force one")
    parser.add_argument("--in-process", action="store_true",
                        help="leave ONNX Runtime's threading per session (for callers that "
                             "create other sessions in the same process)")


def terminal_progress():
    """On a terminal, what the run is doing as it goes (loading the step models can take
    seconds on a large network), one line each on stderr; off a terminal nothing, so a log
    or a script reads only the result and a refusal stays one line."""
    if not sys.stderr.isatty():
        return None
    return lambda line: print(f"explore run: {line}", file=sys.stderr, flush=True)


MAX_THREADS = 1024          # beyond any board or server; a larger figure is a typing error


def whole_number(flag: str, value) -> int:
    """A flag's value as an int, or one line naming the flag (not argparse's usage and error)."""
    from sdf3.errors import InputError
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(str(value).strip())
    except ValueError:
        raise InputError(f"{flag}: expected a whole number, got {value!r}") from None


def check_threads(threads) -> int:
    """--threads before ONNX Runtime sees it (ORT's own refusal is a traceback)."""
    from sdf3.errors import InputError
    threads = whole_number("--threads", threads)
    if not 0 <= threads <= MAX_THREADS:
        raise InputError(f"--threads: expected 0 (one per core) or a thread count up to "
                         f"{MAX_THREADS}, got {threads}")
    return threads


def save_run_files(args: argparse.Namespace, result: dict) -> None:
    """DIR/run.json and DIR/run.html (explorer/report/run_report.py); a folder that cannot
    be written costs one warning line on stderr, not the run's status."""
    from explorer.cli.cpu_profile import this_platform
    from explorer.report.run_report import write_run_files
    settings = {"frames": args.frames, "seed": args.seed, "threads": args.threads,
                "layout": args.layout, "backend": result["backend"], "check": not args.no_check,
                "machine": this_platform()}
    failed = write_run_files(args.dir, result, settings)
    if failed:
        print(f"explore run: warning: {failed}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from deploy.run.measure import measure
    from sdf3.errors import InputError

    args.frames = whole_number("--frames", args.frames)
    args.seed = whole_number("--seed", args.seed)
    if args.frames < 1:
        raise InputError(f"--frames: expected a positive number, got {args.frames}")
    args.threads = check_threads(args.threads)
    from deploy.runtime.executor import StepFailed
    try:
        result = measure(args.dir, frames=args.frames, seed=args.seed, backend=args.backend,
                         threads=args.threads, check=not args.no_check,
                         shared_pool=not args.in_process, layout=args.layout,
                         progress=terminal_progress())
    except StepFailed as err:
        raise InputError(f"{args.dir}: {err}") from None
    verdicts = {}
    if not args.no_check and result.get("max_abs_output"):
        from deploy.run import verdict
        verdicts = result["verdict"] = verdict.for_run(args.dir, result, args.frames, args.seed,
                                                       args.threads)
    status = 4 if any(v["verdict"] == "FAIL" for v in verdicts.values()) else 0
    save_run_files(args, result)
    if args.json:
        print(json.dumps(result))
        return status
    print(f"backend {result['backend']}, {result['frames']} frames")
    planned_on = result.get("plan_platform") or ""
    from deploy.backends import registry
    if planned_on and registry.backend(result["backend"]).capabilities.runs_on_host_cpu:
        from explorer.cli.cpu_profile import this_platform
        if planned_on != this_platform():
            print(f"warning: the plan's fps and memory were predicted for {planned_on}, not "
                  f"this machine ({this_platform()}); expect the measured figures to differ")
    print(f"arena bytes {result['arena_bytes']}, parameter bytes {result['param_bytes']}, "
          f"scratch bytes {result['scratch_bytes']}, peak RSS {result['peak_rss_bytes'] / 2**20:.1f} MiB")
    if "footprint_bytes" in result:
        from deploy.runtime.footprint import describe
        for line in describe(result):
            print(line)
    for cnn, fps in result["fps"].items():
        diff = result["max_abs_diff"].get(cnn)
        diff_s = ("not checked (--no-check)" if args.no_check else
                  "n/a (no reference model)" if diff is None else f"{diff:.3g}")
        v = verdicts.get(cnn, {})
        if "tolerance" in v:
            diff_s += (f" on outputs up to {v['max_abs_output']:.3g} (tolerance {v['tolerance']:.3g}, "
                       f"{v['reference_dtype']} reference"
                       + (", the model is stored in fp16" if v.get("stored_dtype") else "")
                       + f"): {v['verdict']}")
        predicted = (result.get("plan_fps") or {}).get(cnn)
        beside = f" (predicted {predicted:.1f})" if predicted else ""
        print(f"  {cnn}: {fps:.1f} fps{beside}, {result['calls_per_frame'][cnn]} calls/frame, "
              f"max |diff| {diff_s}")
    if status:
        bad = [c for c, v in verdicts.items() if v["verdict"] == "FAIL"]
        print(f"FAIL: outputs of {', '.join(bad)} differ from the unmodified model (exit 4)")
    return status

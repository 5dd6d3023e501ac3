"""`explore run DIR [--frames N] [--json] [--input FRAMES.npy|.npz [--output OUT.npz]]`: run a
deployment (memtrade.run, memtrade/measuring.py) on seeded random frames or the user's own,
and report what was measured: fps per CNN, arena and parameter bytes, calls per frame, peak RSS,
the footprint (peak - the RSS before loading) with its breakdown beside the plan's memory,
and the largest difference to a plain ONNX Runtime session on its reference at the plan's
precision, with a PASS/FAIL verdict per CNN (deploy/run/verdict.py), and at reduced precision
the deviation from the fp32 model (deploy/run/vs_fp32.py); exit status 4 when a CNN fails. The
figures and the command's settings are also written to DIR/run.json and DIR/run.html. With
--input the outputs of every frame are what memtrade.Session.run returns, written to
--output (explorer/cli/frames_file.py)."""
from __future__ import annotations

import argparse
import json
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from deploy.backends import registry
    parser.add_argument("dir", help="directory written by `explore deploy`")
    # numbers are read by run() (whole_number), so `--threads x` is one line like `-1`
    parser.add_argument("--frames", default=20, help="frames to run (default 20)")
    parser.add_argument("--seed", default=0)
    parser.add_argument("--threads", default=0,
                        help="ONNX Runtime intra-op threads per session (0: one per core)")
    parser.add_argument("--backend", choices=registry.names(), default=None,
                        help="override the manifest's backend")
    parser.add_argument("--no-check", action="store_true", help="skip the reference comparison")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--layout", choices=["blocked", "auto", "nchwc", "nchw"], default="blocked",
                        help="ONNX Runtime storage and kernels: blocked (whole-layer tensors in "
                             "ORT's NCHWc layout where both ends allow, other steps as auto), "
                             "auto (per step the faster of NCHWc with reorders and plain NCHW), "
                             "or force one")
    parser.add_argument("--input", metavar="FRAMES", help="run these frames instead of random "
                        "ones: .npy [F, N, C, H, W] (or [N, C, H, W], one frame), or .npz by CNN name")
    parser.add_argument("--output", metavar="OUT.npz", help="with --input: write every frame's "
                        "outputs (one array per model output, frames first; 'cnn/output' keys "
                        "for several CNNs)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing --output")
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


def save_run_files(args: argparse.Namespace, result) -> None:
    """DIR/run.json and DIR/run.html (explorer/report/run_report.py); a folder that cannot
    be written costs one warning line on stderr, not the run's status."""
    from memtrade.platform import this_platform
    from explorer.report.run_report import write_run_files
    settings = {"frames": result.frames if args.input else args.frames, "seed": args.seed,
                "threads": args.threads, "layout": args.layout, "backend": result.backend,
                "check": not args.no_check, "machine": this_platform(), "input": args.input}
    failed = write_run_files(args.dir, result.to_dict(), settings)
    if failed:
        print(f"explore run: warning: {failed}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    import memtrade
    from explorer.cli.frames_file import claim_output, read_frames, write_outputs
    from explorer.cli.run_lines import run_lines
    from deploy.runtime.executor import StepFailed
    from sdf3.errors import InputError

    args.frames = whole_number("--frames", args.frames)
    args.seed = whole_number("--seed", args.seed)
    if args.frames < 1:
        raise InputError(f"--frames: expected a positive number, got {args.frames}")
    args.threads = check_threads(args.threads)
    if args.output and not args.input:
        raise InputError("--output: needs --input (the frames whose outputs it holds)")
    staged = claim_output(args.output, args.force) if args.output else None
    try:
        inputs = read_frames(args.input) if args.input else None
        try:
            res = memtrade.run(args.dir, frames=args.frames, seed=args.seed, threads=args.threads,
                               check=not args.no_check, inputs=inputs, layout=args.layout,
                               backend=args.backend, shared_pool=not args.in_process,
                               progress=terminal_progress())
        except StepFailed as err:
            raise InputError(f"{args.dir}: {err}") from None
        if staged is not None:
            with staged as tmp:
                write_outputs(res, tmp)
    except BaseException:
        if staged is not None:
            staged.discard()
        raise
    save_run_files(args, res)
    if args.json:
        print(json.dumps(res.to_dict()))
    else:
        for line in run_lines(res, args.no_check):
            print(line)
    return 0 if res.passed else 4

"""The `explore` command: parses, calls the library, prints. Handlers live in cmd_*.py."""
from __future__ import annotations

import argparse
import importlib
import sys
import time

from explorer.cli.scratch import scratch_space
from explorer.cli.heartbeat import heartbeat
from explorer.cli.signals import exit_status, terminating_as_interrupt, word
from explorer.report.outputs import interrupt_behind
from explorer.search.run_budget import process_age
from sdf3.errors import InputError

SUBCOMMANDS = {
    # name: (module with add_arguments(parser) and run(args) -> int, help)
    "info": ("explorer.cli.info", "show the CNNs, layers, edges and parameter bytes of an app"),
    "baselines": ("explorer.cli.baselines", "memory of the paper's baselines for an app"),
    "csdf": ("explorer.cli.csdf", "write the CSDF (SDF3 XML) of partitions, buffers, schedules"),
    "deploy": ("explorer.cli.deploy", "build the final application from a plan.json"),
    "run": ("explorer.cli.run", "run a deployed application and measure it"),
    "profile": ("explorer.cli.profile", "measure per-layer times and write a device profile"),
    "primitives": ("explorer.cli.primitives", "pick a primitive per layer by ILP (TASO): exact "
                   "time/memory front and a plan"),
}
MAIN = "explorer.cli.explore"   # `explore APP.yaml ...`: the methodology itself
# the argument that names each command's input file, and the kind of file it takes
# (explorer/app/file_kind.py): a refused file of another kind is named for what it is
INPUT = {"deploy": ("plan", "plan"), "run": ("dir", "manifest")}
APP_INPUT = ("app", "app")


class OneLineParser(argparse.ArgumentParser):
    """argparse with its refusal as one line (`explore: error: ...`, exit status 2), as every
    other bad input gets; `-h` still prints the whole usage."""

    def error(self, message: str):
        where = self.prog.split(" ", 1)[1] + ": " if " " in self.prog else ""
        self.exit(2, f"explore: error: {where}{message}\n")


def _parser(module: str, prog: str, help_: str) -> argparse.ArgumentParser:
    parser = OneLineParser(prog=prog, description=help_)
    importlib.import_module(module).add_arguments(parser)
    return parser


def wrong_input(args: argparse.Namespace, prog: str) -> str | None:
    """When the command's input file is of another kind than it takes (an ONNX model or a
    plan given as the app, an app file given to deploy, ...): the line saying what it is."""
    from explorer.app.file_kind import wrong_file
    attr, kind = INPUT.get(prog.partition(" ")[2], APP_INPUT)
    path = getattr(args, attr, None)
    if getattr(args, "point", None) is not None:
        return None             # deploy --point takes a plan.json or the pareto.json beside it
    return wrong_file(path, kind) if isinstance(path, str) else None


def main(argv: list[str] | None = None) -> int:
    # when explore is the process (argv None) its clock began when the process did: the
    # time budget (explorer/search/run_budget.py) counts the interpreter's start and imports
    started = time.perf_counter() - (process_age() if argv is None else 0.0)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        module, help_ = SUBCOMMANDS[argv[0]]
        prog, argv = f"explore {argv[0]}", argv[1:]
    else:
        module, prog = MAIN, "explore"
        help_ = ("Trade memory against throughput for a CNN application. Subcommands: "
                 + ", ".join(SUBCOMMANDS) + ".")
    args = _parser(module, prog, help_).parse_args(argv)
    args.started = started
    # SIGTERM as Ctrl-C (explorer/cli/signals.py); temporary files in one folder removed at
    # the end (explorer/cli/scratch.py); on a terminal never silent for long
    # (explorer/cli/heartbeat.py)
    with terminating_as_interrupt(), scratch_space(), heartbeat(prog):
        try:
            try:
                return int(importlib.import_module(module).run(args) or 0)
            except InputError as err:
                # the input's kind is looked at only when it is a regular file
                # (explorer/app/file_kind.py), so this never blocks on a FIFO
                print(f"explore: error: {wrong_input(args, prog) or err}", file=sys.stderr)
                return 2
            except Exception as err:           # a signal an extension turned into its own error
                stop = interrupt_behind(err)
                if stop is None:
                    raise
                raise stop from None
        except KeyboardInterrupt as err:   # one line, no traceback; outputs say what they undid
            print(f"explore: {word(err)}{': ' + str(err) if str(err) else ''}", file=sys.stderr)
            return exit_status(err)

if __name__ == "__main__":
    sys.exit(main())

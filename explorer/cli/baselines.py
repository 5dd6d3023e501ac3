"""`explore baselines APP.yaml [--json]`: the memory of the paper's yardsticks for one app
(Table 12's columns): no reuse, Pisarchyk & Lee's shared objects, processing by parts
everywhere ([17], then Algorithm 1), Algorithm 1 alone, and the lower bound of the chosen
schedules. See explorer/report/baselines.py and docs/memory.md.

--json prints {"none": {"total_bytes", "param_bytes", "buffer_bytes", "buffers"},
"pisarchyk": {...}, "all_parts": {...}, "reuse": {...}, "lower_bound": {...}}; for the
lower bound "buffers" is the number of edge uses alive at its worst moment.
"""
from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table

from explorer.app.appfile import load_app
from explorer.memory.placement import planner
from explorer.report.baselines import baselines

ORDER = ("none", "pisarchyk", "all_parts", "all_parts_bound", "reuse", "lower_bound")
LABELS = {"none": "none (one buffer per edge)", "pisarchyk": "pisarchyk (Pisarchyk & Lee)",
          "all_parts": "all_parts (by parts everywhere)", "reuse": "reuse (Algorithm 1)",
          "all_parts_bound": "  its lower bound (most alive at once)",
          "lower_bound": "lower bound (most alive at once)"}
MIB = 2 ** 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", help="application file (YAML)")
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    parser.add_argument("--precision", help="fp32 | fp16 | mixed | int8 (overrides the file)")
    parser.add_argument("--no-all-parts", action="store_true",
                        help="skip the processing-by-parts baseline (it analyses every partition)")
    parser.add_argument("--unfused", action="store_true", help="keep every ONNX node as a layer")
    add_placement(parser)


def add_placement(parser: argparse.ArgumentParser) -> None:
    """--placement, shared by `explore` and `explore baselines`."""
    from explorer.memory.placement import DEFAULT, NAMES
    parser.add_argument("--placement", choices=NAMES, default=DEFAULT,
                        help="buffer placement: offsets in one arena (default: layers reordered, "
                             "phase schedules chosen for total memory, multi-order best fit), "
                             "greedy-by-size (TFLite's offsets), optimal (MILP, small apps), or "
                             "shared-objects (the paper's Algorithm 1 and schedules)")


def run(args: argparse.Namespace) -> int:
    app = load_app(args.app, precision=args.precision, fused=not args.unfused)
    app.placement = args.placement
    rows = baselines(app, with_all_parts=not args.no_all_parts)
    if args.json:
        print(json.dumps({k: rows[k].as_json() for k in ORDER if k in rows}, indent=2))
        return 0
    console = Console(width=None if sys.stdout.isatty() else 140)
    console.print(f"[bold]{app.name}[/bold]  precision {app.precision.name} "
                  f"(data {app.precision.data_bytes} B, parameters {app.precision.par_bytes} B); "
                  f"placement {app.placement}; "
                  f"MB = MiB = 2^20 bytes, as in the paper")
    table = Table("baseline", "params MiB", "buffers MiB", "total MiB", "param bytes",
                  "buffer bytes", "total bytes", "buffers")
    for key in ORDER:
        if key not in rows:
            continue
        r = rows[key]
        label = LABELS[key]
        if planner(app.placement).reorders and key in ("reuse", "all_parts"):
            label = label.split(" (")[0] + (" (whole layers" if key == "reuse" else
                                             " (by parts everywhere") + f", {app.placement})"
        table.add_row(label, f"{r.param_bytes / MIB:.2f}", f"{r.buffer_bytes / MIB:.2f}",
                      f"{r.total_bytes / MIB:.2f}", f"{r.param_bytes:,}", f"{r.buffer_bytes:,}",
                      f"{r.total_bytes:,}", str(len(r.buffers)))
    console.print(table)
    return 0

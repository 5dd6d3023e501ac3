"""`explore csdf APP.yaml [--parts L[:K],...|--all-parts] [--rows K] --out DIR [--json]`: the
CSDF model of every partition for a choice of layers by parts (K output rows per phase,
default 1 = row by row), as SDF3 XML, with buffers and schedules."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from csdf.partition_analysis import PartitionAnalysis, analyse_partition
from csdf.parts import can_split, phases_for_rows
from csdf.to_csdf import to_csdf
from explorer.report.outputs import claim_dir
from sdf3.errors import InputError
from sdf3.xml import write_xml


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", help="application file (YAML)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--parts", default="",
                       help="comma-separated layers to process by parts (LAYER or CNN.LAYER, "
                            "optionally :K output rows per phase); default: none")
    which.add_argument("--all-parts", action="store_true",
                       help="every layer that can, by parts (the paper's [17])")
    parser.add_argument("--rows", type=int, default=1, metavar="K",
                        help="output rows per phase of the layers by parts without their own "
                             ":K (default 1, row by row)")
    parser.add_argument("--out", required=True, help="directory for the SDF3 XML files")
    parser.add_argument("--force", action="store_true", help="write into a non-empty --out")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def chosen_phases(app, parts: str, every: bool, rows: int = 1) -> dict[str, dict[str, int]]:
    """Phases per CNN and layer; a bare LAYER applies to every CNN that has it, LAYER:K
    gives it K output rows per phase (else `rows`)."""
    if rows < 1:
        raise InputError(f"--rows: expected an integer >= 1, got {rows}")
    if every:
        return {name: phases_for_rows(cnn, {x: rows for x in cnn.graph.nodes})
                for name, cnn in app.cnns.items()}
    chosen: dict[str, dict[str, int]] = {name: {} for name in app.cnns}
    for item in filter(None, (s.strip() for s in parts.split(","))):
        item, _, k_text = item.partition(":")
        if k_text and not (k_text.isdigit() and int(k_text) >= 1):
            raise InputError(f"--parts: {item}:{k_text}: expected LAYER:K with K an integer >= 1")
        cnn_name, _, layer = item.rpartition(".")
        if cnn_name in app.cnns and layer in app.cnns[cnn_name].graph:
            owners = [cnn_name]
        else:
            owners = [n for n, cnn in app.cnns.items() if item in cnn.graph]
            layer = item
        if not owners:
            raise InputError(f"--parts: unknown layer {item!r} (expected a layer name as in "
                             "`explore info`, or CNN.LAYER)")
        for owner in owners:
            if not can_split(app.cnns[owner].layer(layer)):
                print(f"explore csdf: note: {owner}.{layer} ({app.cnns[owner].layer(layer).op}) "
                      "cannot go by parts; it keeps 1 phase", file=sys.stderr)
            chosen[owner][layer] = int(k_text) if k_text else rows
    return {name: phases_for_rows(cnn, chosen[name]) for name, cnn in app.cnns.items()}


def _summary(a: PartitionAnalysis) -> dict:
    return {"buffers": {f"{s}->{d}": n for (s, d), n in a.edge_elements.items()},
            "firings": dict(a.firing_counts),
            "schedule": a.schedule}


def _print_text(name: str, a: PartitionAnalysis, path: Path, cnn) -> None:
    from csdf.parts import rows_per_phase
    from explorer.report.gene_strip import layer_notation

    print(f"partition {name}: {len(a.layers)} layers, {len(a.firings)} firings -> {path}")
    for (s, d), elements in a.edge_elements.items():
        rows = a.edge_rows[(s, d)]
        print(f"  {s}->{d}: {rows} row{'s' if rows != 1 else ''}, {elements} elements")
    split = {layer: n for layer, n in a.firing_counts.items() if n > 1}
    print("  by parts: " + (", ".join(
        f"{layer_notation(k, rows_per_phase(cnn.layer(k).output_shape[2], v))} ({v} phases)"
        for k, v in split.items()) or "none"))
    print(f"  schedule: {a.schedule}")


def run(args: argparse.Namespace) -> int:
    # --out is checked and claimed before any work; files go to a temporary sibling that
    # replaces it at the end (explorer/report/outputs.py)
    with claim_dir(args.out, args.force) as out:
        return _run(args, out)


def _run(args: argparse.Namespace, out: Path) -> int:
    from explorer.app.appfile import load_app

    app = load_app(args.app)
    phases = chosen_phases(app, args.parts, args.all_parts, args.rows)
    report = {}
    for part in app.partitions:
        cnn = app.cnns[part.cnn]
        analysis = analyse_partition(cnn, part.layers, phases[part.cnn])
        path = out / f"{part.name}.xml"
        write_xml(to_csdf(cnn, analysis.layers, analysis.phases, name=part.name.replace(".", "_"),
                          self_loops=True), path)
        report[part.name] = _summary(analysis)
        if not args.json:
            _print_text(part.name, analysis, Path(args.out) / path.name, cnn)
    if args.json:
        print(json.dumps({"partitions": report}, indent=2))
    return 0

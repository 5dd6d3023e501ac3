"""`explore info APP.yaml [--json] [--layers]`: what was loaded (memtrade.info, memtrade/info.py
names every figure), as tables or as JSON; a line per graph input whose dynamic batch
dimension was taken as 1.
"""
from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table

from explorer.app.appfile import load_app
from explorer.app.units import format_bytes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", help="application file (YAML)")
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of tables")
    parser.add_argument("--layers", action="store_true", help="also list every layer with its op and shape")
    parser.add_argument("--mem", help="memory constraint override, e.g. 8MB")
    parser.add_argument("--fps", help="throughput override: 71 or name=71,name2=30")
    parser.add_argument("--precision", help="fp32 | fp16 | mixed | int8")
    parser.add_argument("--unfused", action="store_true", help="keep every ONNX node as a layer (no TensorRT-like fusion)")


def run(args: argparse.Namespace) -> int:
    from memtrade.info import info as summary
    app = load_app(args.app, mem=args.mem, fps=args.fps, precision=args.precision, fused=not args.unfused)
    info = summary(app, layers=args.layers)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    console = Console(width=None if sys.stdout.isatty() else 130)
    prec = info["precision"]
    mem = "none" if app.memory is None else format_bytes(app.memory)
    auto = (f" (auto: each layer {'/'.join(info['layer_precisions'])}, bytes below at fp32)"
            if info["layer_precisions"] else "")
    console.print(f"[bold]{app.name}[/bold]  platform {app.platform}, precision {prec['name']}{auto} "
                  f"(data {prec['data_bytes']} B, parameters {prec['par_bytes']} B), memory constraint {mem}")
    table = Table("CNN", "layers", "edges", "params", "param bytes", "edge elements", "edge bytes",
                  "naive buffers", "fps")
    for name, c in info["cnns"].items():
        table.add_row(name, str(c["layers"]), str(c["edges"]), f"{c['param_count']:,}", format_bytes(c["param_bytes"]),
                      f"{c['edge_elements']:,}", format_bytes(c["edge_bytes"]), f"{c['naive_elements']:,}",
                      f"{c['fps']:g}" if c["fps"] else "-")
    if len(info["cnns"]) > 1:
        t = info["total"]
        table.add_row("total", str(t["layers"]), str(t["edges"]), f"{t['param_count']:,}", format_bytes(t["param_bytes"]),
                      f"{t['edge_elements']:,}", format_bytes(t["edge_bytes"]), f"{t['naive_elements']:,}", "")
    console.print(table)
    for name, c in info["cnns"].items():
        for value in c["batch_fixed"]:
            console.print(f"{name}: graph input '{value}' has a dynamic batch dimension: taken as "
                          f"1, shape {c['input_shapes'][value]}")
        if c["quantization_points"]:
            console.print(f"{name}: {len(c['quantization_points'])} layers keep the QDQ model's own "
                          "quantization points inside them (--layers names the points)")
        if c["unkept_points"]:
            console.print(f"{name}: {len(c['unkept_points'])} of the QDQ model's quantization points are "
                          f"not kept, computed through in fp32: {', '.join(c['unkept_points'][:3])}")
        for layer, op in c["kept_apart"].items():
            console.print(f"{name}: layer {layer}: its {op} is a layer of its own (a quantization "
                          "point lies between them)")
        if c["shapes_from_ort"]:
            console.print(f"{name}: shapes of {c['shapes_from_ort']:,} tensors from one ONNX "
                          "Runtime run (ONNX shape inference left them unknown)")
    parts = Table("partition", "layers", "first", "last", "processor", "pipeline set")
    for p in info["partitions"]:
        group = next(i for i, g in enumerate(app.pipelines) if p["name"] in g)
        parts.add_row(p["name"], str(p["layers"]), p["first"], p["last"], p["processor"], f"J{group + 1}")
    console.print(parts)
    if args.layers:
        for name, c in info["cnns"].items():
            _print_layers(name, c["layer_list"])
    return 0


def _print_layers(cnn: str, layers: list[dict]) -> None:
    """One row per layer. Names are what an app file's partitions and schedules use, so they
    are never cut: the table is as wide as its longest row needs (inputs fold instead)."""
    lt = Table(title=cnn)
    longest = max(len(l["name"]) for l in layers)
    lt.add_column("layer", no_wrap=True, min_width=longest)
    lt.add_column("op", no_wrap=True)
    lt.add_column("activation")
    lt.add_column("inputs", overflow="fold")
    lt.add_column("output [N, C, H, W]", no_wrap=True)
    lt.add_column("params", no_wrap=True, justify="right")
    points = any(l.get("quantization_points") for l in layers)
    if points:
        lt.add_column("quantization points", no_wrap=True)
    for l in layers:
        op = l["op"] if l["op"] != "Opaque" else f"Opaque({','.join(l.get('onnx_ops', []))})"
        row = [l["name"], op, ",".join(l["activation"]), ",".join(l["inputs"]), str(l["shape"]), f"{l['params']:,}"]
        lt.add_row(*row, *([",".join(l.get("quantization_points", []))] if points else []))
    Console(width=max(130, longest + 110), soft_wrap=False).print(lt)

"""`explore info APP.yaml [--json] [--layers]`: what was loaded, so a user can check an app
file before a search: per CNN the layers, edges, parameters and the naive edge total.

Figures (also the --json keys, per CNN): layers (incl. Input layers), edges ((producer,
consumer) pairs, one buffer each), param_count (after BN folding), original_param_count
(ONNX initializer elements), param_bytes = param_count x par_bytes, edge_elements (sum over
edges, each counted once; a double-buffered pipeline edge's second copy is not included),
edge_bytes = edge_elements x data_bytes, crossing_elements (edges between two partitions of
one pipeline set: their second copy, double buffering) and naive_elements = edge_elements +
crossing_elements, the paper's Table 1 total of one buffer per edge (59,658 for the worked
example); input_shapes (each ONNX graph input's static shape) and batch_fixed (the inputs
whose dynamic batch dimension was taken as 1, also printed as a line each).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from explorer.app.model import Application
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


def crossing_elements(app: Application, cnn_name: str) -> int:
    """Elements of the second copies of edges that cross partitions of one pipeline set."""
    cnn = app.cnns[cnn_name]
    where = {layer: p.name for p in app.partitions_of(cnn_name) for layer in p.layers}
    total = 0
    for u, v in cnn.edges():
        if where[u] != where[v] and where[v] in app.pipeline_of(where[u]):
            total += cnn.edge_elements(u, v)
    return total


def summary(app: Application, layers: bool = False) -> dict[str, Any]:
    """The figures `info` prints, as plain data."""
    prec = app.precision
    cnns = {}
    for name, cnn in app.cnns.items():
        edge_elements = cnn.edge_elements_total
        crossing = crossing_elements(app, name)
        entry: dict[str, Any] = {
            "source": cnn.source,
            "layers": len(cnn.graph),
            "edges": len(cnn.edges()),
            "param_count": cnn.param_count,
            "original_param_count": cnn.original_param_count,
            "param_bytes": cnn.param_count * prec.par_bytes,
            "edge_elements": edge_elements,
            "edge_bytes": edge_elements * prec.data_bytes,
            "crossing_elements": crossing,
            "naive_elements": edge_elements + crossing,
            "outputs": list(cnn.outputs),
            "shapes_from_ort": cnn.shapes_from_ort,
            "input_shapes": {k: list(v) for k, v in cnn.input_shapes.items()},
            "batch_fixed": list(cnn.batch_fixed),
            "fps": app.fps.get(name, 0.0),
            "partitions": [p.name for p in app.partitions_of(name)],
        }
        if layers:
            entry["layer_list"] = [
                {"name": l.name, "op": l.op, "activation": list(l.hyper.get("activation", [])),
                 "inputs": list(l.inputs), "shape": list(l.output_shape), "params": l.param_count,
                 "onnx_nodes": list(l.onnx_nodes),
                 **({"onnx_ops": list(l.hyper["onnx_ops"]), "per_pixel": bool(l.hyper.get("per_pixel"))}
                    if l.op == "Opaque" else {})}
                for l in cnn.layers()]
        cnns[name] = entry
    return {
        "name": app.name,
        "path": str(app.path) if app.path else None,
        "platform": app.platform,
        "precision": {"name": prec.name, "data_bytes": prec.data_bytes, "par_bytes": prec.par_bytes},
        "memory_bytes": app.memory,
        "cnns": cnns,
        "partitions": [{"name": p.name, "cnn": p.cnn, "first": p.layers[0], "last": p.layers[-1],
                        "layers": len(p.layers), "processor": p.processor} for p in app.partitions],
        "pipelines": app.pipelines,
        "total": {k: sum(c[k] for c in cnns.values())
                  for k in ("layers", "edges", "param_count", "param_bytes", "edge_elements", "edge_bytes",
                            "crossing_elements", "naive_elements")},
    }


def run(args: argparse.Namespace) -> int:
    app = load_app(args.app, mem=args.mem, fps=args.fps, precision=args.precision, fused=not args.unfused)
    info = summary(app, layers=args.layers)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    console = Console(width=None if sys.stdout.isatty() else 130)
    prec = info["precision"]
    mem = "none" if app.memory is None else format_bytes(app.memory)
    console.print(f"[bold]{app.name}[/bold]  platform {app.platform}, precision {prec['name']} "
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
    for l in layers:
        op = l["op"] if l["op"] != "Opaque" else f"Opaque({','.join(l.get('onnx_ops', []))})"
        lt.add_row(l["name"], op, ",".join(l["activation"]), ",".join(l["inputs"]),
                   str(l["shape"]), f"{l['params']:,}")
    Console(width=max(130, longest + 110), soft_wrap=False).print(lt)

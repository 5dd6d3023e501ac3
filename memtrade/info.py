"""`memtrade.info`: what an application loads as, so a user can check an app before a search:
per CNN the layers, edges, parameters and the naive edge total (the figures of `explore info`
and its --json keys).

Per CNN: layers (incl. Input layers), edges ((producer, consumer) pairs, one buffer each),
param_count (after BN folding), original_param_count (ONNX initializer elements),
param_bytes = param_count x par_bytes, edge_elements (sum over edges, each counted once; a
double-buffered pipeline edge's second copy is not included), edge_bytes = edge_elements x
data_bytes, crossing_elements (edges between two partitions of one pipeline set: their second
copy, double buffering) and naive_elements = edge_elements + crossing_elements, the paper's
Table 1 total of one buffer per edge (59,658 for the worked example); input_shapes (each ONNX
graph input's static shape) and batch_fixed (the inputs whose dynamic batch dimension was
taken as 1). For a model already quantized (QDQ, csdf/onnx_qdq.py): quantization_points,
the layers that keep the model's own quantization points inside them (layer -> points,
"act<i>": what its i-th fused activation reads, "gate<i>": the gate of its i-th, Swish or
HardSwish), and kept_apart, the layers whose BatchNormalization or bias Add the import left
a layer of its own because a quantization point lies between them (layer -> that op), and
unkept_points, the model's points that are neither (ONNX tensor names; none expected).
"""
from __future__ import annotations

from typing import Any

from explorer.app.model import Application


def crossing_elements(app: Application, cnn_name: str) -> int:
    """Elements of the second copies of edges that cross partitions of one pipeline set."""
    cnn = app.cnns[cnn_name]
    where = {layer: p.name for p in app.partitions_of(cnn_name) for layer in p.layers}
    total = 0
    for u, v in cnn.edges():
        if where[u] != where[v] and where[v] in app.pipeline_of(where[u]):
            total += cnn.edge_elements(u, v)
    return total


def info(app: Application, layers: bool = False) -> dict[str, Any]:
    """The figures `explore info` prints, as plain data (the --json object)."""
    prec = app.precision
    cnns = {}
    for name, cnn in app.cnns.items():
        q = cnn.quantized
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
            "quantization_points": {l: list(q.points_of(l)) for l in cnn.order() if q and q.points_of(l)},
            "kept_apart": dict(q.apart) if q else {},
            "unkept_points": list(q.unkept) if q else [],
        }
        if layers:
            entry["layer_list"] = [
                {"name": l.name, "op": l.op, "activation": list(l.hyper.get("activation", [])),
                 "inputs": list(l.inputs), "shape": list(l.output_shape), "params": l.param_count,
                 "onnx_nodes": list(l.onnx_nodes),
                 **({"quantization_points": list(q.points_of(l.name))} if q and q.points_of(l.name) else {}),
                 **({"kept_apart": q.apart[l.name]} if q and l.name in q.apart else {}),
                 **({"onnx_ops": list(l.hyper["onnx_ops"]), "per_pixel": bool(l.hyper.get("per_pixel"))}
                    if l.op == "Opaque" else {})}
                for l in cnn.layers()]
        cnns[name] = entry
    return {
        "name": app.name,
        "path": str(app.path) if app.path else None,
        "platform": app.platform,
        "precision": {"name": prec.name, "data_bytes": prec.data_bytes, "par_bytes": prec.par_bytes},
        # precision: auto: what each layer may take (the bytes above are then fp32's)
        "layer_precisions": list(app.precisions), "min_sqnr_db": app.min_sqnr_db,
        "memory_bytes": app.memory,
        "cnns": cnns,
        "partitions": [{"name": p.name, "cnn": p.cnn, "first": p.layers[0], "last": p.layers[-1],
                        "layers": len(p.layers), "processor": p.processor} for p in app.partitions],
        "pipelines": app.pipelines,
        "total": {k: sum(c[k] for c in cnns.values())
                  for k in ("layers", "edges", "param_count", "param_bytes", "edge_elements", "edge_bytes",
                            "crossing_elements", "naive_elements")},
    }

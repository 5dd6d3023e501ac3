"""The workspace of conversions at precision boundaries, for plans whose layers run at
different precisions (explorer/app/layer_precision.py; docs/precision.md "Per layer").

A deployment's step computes in fp32 (ONNX Runtime's CPU kernels): it reads each input stored
below fp32 through a Cast or a DequantizeLinear into an fp32 copy, and makes its output in fp32
before a Cast or QuantizeLinear stores it. Those fp32 copies are the step's conversion
workspace, counted here for one firing: 4 bytes per element of each input stored below fp32
(a whole tensor, or by parts the rows one phase gathers: (k - 1) x stride + extent of a
window) and of its output when stored below fp32 (the whole, or k rows). An int8 layer whose
inputs are all stored at int8 is ONNX Runtime's QDQ pattern, fused into an integer kernel
that makes no fp32 copy: 0. The plan's conversion workspace is, like its measured workspace
(explorer/throughput/runtime_costs.py), the largest step's per partition, summed over the
partitions of a pipeline set, the largest over sets.
"""
from __future__ import annotations

from math import prod

from csdf.model import CNN, INPUT
from csdf.parts import rows_per_phase, window
from explorer.app.layer_precision import LayerPrecisions

FP32 = 4


def step_bytes(cnn: CNN, name: str, layer: str, phases: int, layers: LayerPrecisions) -> int:
    """Conversion bytes of one firing of `layer` (CNN `name`, graph `cnn`) in `phases` phases."""
    node = cnn.layer(layer)
    if node.op == INPUT:
        return 0
    sources = list(dict.fromkeys(node.inputs))
    stored = {s: layers.tensor(cnn, name, s).name for s in sources}
    own = layers.name(name, layer)
    if own == "int8" and all(p == "int8" for p in stored.values()):
        return 0
    out_shape = [int(v) for v in node.output_shape]
    k = rows_per_phase(out_shape[2], phases) if phases > 1 else out_shape[2]
    total = 0
    for s in sources:
        if stored[s] == "fp32":
            continue
        n, c, h, w = (int(v) for v in cnn.edge_shape(s, layer))
        rows = h
        if phases > 1:
            win = window(cnn, node, s)
            rows = min(h, (k - 1) * max(win.stride, 1) + win.extent) if win.stride else h
        total += FP32 * n * c * rows * w
    if own != "fp32":
        total += FP32 * prod(out_shape[:2]) * k * prod(out_shape[3:])
    return total


def conversion_bytes(app, phases: dict[str, dict[str, int]], layers: LayerPrecisions) -> int:
    """The plan's conversion workspace under `phases` (module docstring)."""
    per_part = {}
    for part in app.partitions:
        cnn, ph = app.cnns[part.cnn], phases.get(part.cnn, {})
        per_part[part.name] = max((step_bytes(cnn, part.cnn, l, int(ph.get(l, 1)), layers)
                                   for l in part.layers), default=0)
    return max((sum(per_part.get(p, 0) for p in group) for group in app.pipelines), default=0)

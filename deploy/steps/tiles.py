"""Deploying a fused-tiled group: one ONNX model per distinct tile shape, called N x M times.

A tiled group of the plan (its `tilings`, explorer/tiling/fused.py) is one step of its partition
(deploy/build/tile_step.py) that makes one call per tile (DeepThings' fused tile partitioning, csdf/tiling.py). The tile
model of a shape reads the group's whole input tensor (its arena view) and slices the tile's
input region out of it (`starts` / `ends` are inputs bound per tile, so tiles of one shape
share the model); it runs the group's layers with the tile's own pads (the layer's padding at
the map's border, none inside) and writes every inner tensor of the tile into that edge's
per-tile buffer of the arena (the model's outputs `mid<k>`, bound to arena views, so the
plan's per-tile buffers are where the intermediates live). The tile's output, `out`, is
pasted into the group's output tensor(s) in the arena at the tile's region (a strided copy:
ONNX Runtime writes only contiguous buffers). The sliced input and the output tile are
ONNX Runtime's / the step's own scratch, like the gathered window of a step by parts.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper

from csdf.layer_attrs import with_hyper
from csdf.model import CNN
from csdf.tiling import Group, Tile
from deploy.quant.scales import TensorScale
from deploy.quant.stored import FP32, Weights
from deploy.steps import storage
from deploy.steps.builder import IR_VERSION, ONNX_TYPE, OPSET, Builder
from deploy.steps.parts import layer_core


def tile_model(cnn: CNN, group: Group, tile: Tile, dtype: str, layout: str = "nchw",
               weights: Weights = FP32, scales: Mapping[str, TensorScale] | None = None
               ) -> onnx.ModelProto:
    """The model of `tile`'s shape: in0 (whole input, NCHW or, when its producer runs by
    parts, rows first: HNCW) + starts/ends [row, column] -> mid<k>..., out; `weights`: how
    parameters are stored (deploy/quant/stored.py). Each layer reads its predecessor's output
    as stored (deploy/steps/storage.py; `scales` for int8)."""
    b = Builder(dtype, weights, scales)
    elem = ONNX_TYPE[dtype]
    first = cnn.layer(group.layers[0])
    n, c, h, w = (int(v) for v in cnn.edge_shape(first.inputs[0], first.name))
    in_shape = [h, n, c, w] if layout == "hncw" else [n, c, h, w]
    inputs = [helper.make_tensor_value_info("in0", elem, in_shape),
              helper.make_tensor_value_info("starts", TensorProto.INT64, [2]),
              helper.make_tensor_value_info("ends", TensorProto.INT64, [2])]
    axes = b.const(b.tmp("axes"), np.array([0, 3] if layout == "hncw" else [2, 3], np.int64))
    x = b.node("Slice", ["in0", "starts", "ends", axes])
    if layout == "hncw":                     # only the crop is transposed back to NCHW
        x = b.node("Transpose", [x], perm=[1, 2, 0, 3])
    x = storage.load(b, x, first.inputs[0])
    outputs = []
    for k, lt in enumerate(tile.layers):
        layer = cnn.layer(lt.layer)
        if "pads" in layer.hyper or layer.op in ("Conv", "MaxPool", "AveragePool"):
            layer = with_hyper(layer, pads=list(lt.pads))
        n, c = (int(v) for v in layer.output_shape[:2])
        # the layer at the tile's shape; its params keep their ONNX sources (a QDQ model's
        # weights are stored with their own scales)
        shaped = replace(layer, output_shape=(n, c, lt.out_h.size, lt.out_w.size))
        in_c = int(cnn.edge_shape(layer.inputs[0], layer.name)[1])
        x = layer_core(b, shaped, [x], [(n, in_c, lt.in_h.size, lt.in_w.size)], None, None)
        name = "out" if k == len(tile.layers) - 1 else f"mid{k}"
        y = storage.store(b, x, layer.name)
        x = storage.load(b, y, layer.name) if k < len(tile.layers) - 1 else x
        b.nodes.append(helper.make_node("Identity", [y], [name]))
        outputs.append(helper.make_tensor_value_info(name, elem, [n, c, lt.out_h.size, lt.out_w.size]))
    graph = helper.make_graph(b.nodes, f"{group.name}_tile", inputs, outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="memtrade.deploy")
    model.ir_version = IR_VERSION
    return model

"""The manifest step of a fused-tiled group (deploy/steps/tiles.py builds its tile models):
one call per tile, each slicing the group's input, writing the tile's inner tensors into
their per-tile buffers and pasting its output into the group's output tensors."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

import onnx

from csdf.model import CNN
from csdf.tiling import Group, distinct_shapes, tile_group
from deploy.quant.scales import TensorScale
from deploy.quant.stored import weights_of
from deploy.runtime.manifest_records import StepModel, StoredEdge
from deploy.runtime.step_records import Binding, Step, TileCall, TiledGroup, TileMid
from deploy.steps import tiles as tile_models


def group_step(cnn: CNN, group: Group, edge_copies: Callable[[str, str], list[str]],
               dtype: str, out: Path, models: dict[str, StepModel], safe: Callable[[str], str],
               edges: dict[str, StoredEdge] | None = None, weights: str = "float32",
               scales: Mapping[str, TensorScale] | None = None) -> Step:
    """The manifest step of one tiled group: its tile calls (model, region, bindings); its
    tile models are written to `out` and listed in `models`. `edges`: the manifest's edges
    by name; `weights`: the parameters' storage type (deploy/quant/stored.py WEIGHT_TYPES);
    `scales`: int8's."""
    layers = tuple(group.layers)
    first, last = cnn.layer(layers[0]), layers[-1]
    in_edges = tuple(edge_copies(first.inputs[0], layers[0]))
    stored_in = (edges or {}).get(in_edges[0])
    layout = stored_in.layout if stored_in is not None else "nchw"
    mids = [tuple(edge_copies(a, b)) for a, b in group.internal_edges()]
    succ = [d for d in cnn.order() if cnn.graph.has_edge(last, d)]
    outs = tuple(tuple(edge_copies(last, d)) for d in succ)
    sink = cnn.graph.out_degree(last) == 0
    tiles = tile_group(cnn, list(layers), group.n, group.m)
    calls = []
    for shape_no, (key, same) in enumerate(distinct_shapes(tiles).items()):
        rel = f"models/{safe(cnn.name)}/{safe(group.name)}.tile{shape_no}.onnx"
        if rel not in models:
            model = tile_models.tile_model(cnn, group, same[0], dtype, layout, weights_of(weights, cnn), scales)
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            onnx.save(model, str(out / rel))
            models[rel] = StepModel(cnn.name, group.name, f"tile{shape_no}",
                                    ("in0", "starts", "ends"),
                                    tuple(f"mid{k}" for k in range(len(mids))) + ("out",), layers)
        for t in same:
            n, c = (int(v) for v in cnn.layer(last).output_shape[:2])
            calls.append(TileCall(
                (t.i, t.j), rel, (t.in_h.start, t.in_w.start), (t.in_h.stop, t.in_w.stop),
                tuple(TileMid(e, tuple(int(v) for v in cnn.layer(a).output_shape[:2])
                              + (lt.out_h.size, lt.out_w.size))
                      for e, a, lt in zip(mids, layers[:-1], t.layers[:-1])),
                (t.out_h.start, t.out_h.stop, t.out_w.start, t.out_w.stop),
                (n, c, t.out_h.size, t.out_w.size)))
    calls.sort(key=lambda c: c.tile)
    bind = tuple(Binding("tile", edges=e) for e in [in_edges, *mids, *outs])
    return Step(layers[0], 0, None, bind,
                group=TiledGroup(layers, (group.n, group.m), in_edges, outs,
                                 last if sink else None, tuple(calls)))

"""The ONNX model of a region step: a run of consecutive by-parts firings of one partition
computed by ONE ONNX Runtime call.

A band of a by-parts region is the firings the plan's schedule makes between two points
where a ring would wrap onto rows still to be read (deploy/build/regions.py cuts them). Its
model computes every firing of the band in the schedule's order, as the part models of
deploy/steps/parts.py would one call each, with two differences:

- a row a firing reads that an earlier firing of the same band produced is taken from that
  firing's result inside the graph (a Slice), not from the ring; rows made before the band
  are gathered from the ring (an arena view) as the part models gather them. Rows are made
  in increasing order, so a window is [gathered rows, then rows of this band]: one Concat;
- a window that meets the layer's top or bottom padding reads only its real rows and runs
  the Conv or pool with those padding rows as its own pads (no mask input, no anchor).

Every firing still writes its rows to its ring slots (the plan's buffers, so the next band
and every check see the plan's state); a band's intermediates are ONNX Runtime's workspace.
The model's inputs are the rings it gathers from (`in<j>` + `in<j>_idx`, int32 slots) and
whole 1-row tensors; its outputs the ring slots it writes (`out<j>`, [rows, N, C, W]) and the
CNN's output rows (`sink<j>`). The slot indices are inputs, so the bands of a region's
steady state share one model (and one session).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper

from csdf.layer_attrs import WindowAttrs, with_hyper
from csdf.model import CNN, Layer
from deploy.quant.scales import TensorScale
from deploy.quant.stored import FP32, Weights
from deploy.steps import storage
from deploy.steps.builder import IR_VERSION, ONNX_TYPE, OPSET, Builder
from deploy.steps.parts import ELEMENTWISE_OPS, WINDOW_OPS, layer_core


@dataclass(frozen=True)
class Read:
    """One input of one firing: the real input rows it reads (increasing) and how many
    padding rows its window has above and below them; `whole`: a 1-row tensor read whole."""
    src: str
    copies: tuple[str, str]              # the stored edge on even and odd frames
    rows: tuple[int, ...]
    pad_top: int = 0
    pad_bottom: int = 0
    whole: bool = False


@dataclass(frozen=True)
class Firing:
    """One firing of a layer by parts: output rows first .. first + count - 1."""
    layer: str
    phase: int
    first: int
    count: int
    reads: tuple[Read, ...]
    writes: tuple[tuple[str, str], ...]  # stored tensors it writes (edge copies)
    sink: bool = False                   # also the CNN's output rows
    readers: tuple[tuple[str, ...], ...] = ()   # per write, the layers reading that tensor
    parts: tuple[int, ...] = ()          # merged firings (deploy/build/regions.merge): their rows

    @property
    def phases(self) -> list[tuple[int, int]]:
        """(phase, rows) of each plan firing this firing computes."""
        return list(enumerate(self.parts or (self.count,), self.phase))


@dataclass(frozen=True)
class InputPort:
    """An input port of a band's model: stored tensor `copies` viewed whole (`shape`, as
    stored) and, for a ring read by rows, `slots`: the ring slots it gathers (port
    `<port>_idx`); None for a tensor read whole."""
    port: str
    copies: tuple[str, ...]
    shape: tuple[int, ...]
    slots: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Piece:
    """Where a read's rows come from: `gathered` rows of the ring (port `port`), then rows
    [a, b) of the results of earlier firings of the band (index into the band)."""
    port: str | None
    gathered: int
    inner: tuple[tuple[int, int, int], ...]      # (firing, a, b)
    whole: bool = False


def fusable(cnn: CNN, layer: Layer) -> bool:
    """Layers a region step computes: Conv/pools (not an AveragePool whose divisor counts
    rows past its bottom padding), elementwise ops and a channel Concat."""
    if layer.op in WINDOW_OPS:
        win = WindowAttrs.of(layer)
        if win.auto_pad not in ("NOTSET", b"NOTSET"):
            return False
        if layer.op == "AveragePool" and win.counts_pad and win.ceil_mode:
            return False
        return True
    return layer.op in ELEMENTWISE_OPS or layer.op == "Concat"


def pieces(band: list[Firing], edges: dict) -> tuple[list[list[Piece]], list[InputPort]]:
    """Each read of each firing of `band` split into gathered and inner rows, and the input
    ports: one ring port per read with gathered rows (its slot indices), one per whole
    read. `edges`: the manifest's edges."""
    made: dict[str, list[tuple[int, int, int]]] = {}      # src -> (firing, first, count)
    out: list[list[Piece]] = []
    ports: list[InputPort] = []
    for i, f in enumerate(band):
        mine = []
        for r in f.reads:
            e = edges[r.copies[0]]
            if r.whole:
                port = f"in{len(ports)}"
                ports.append(InputPort(port, tuple(r.copies), tuple(e.stored_shape)))
                mine.append(Piece(port, 0, (), True))
                continue
            inner, old = [], []
            for row in r.rows:
                hit = next(((g, row - first) for g, first, count in made.get(r.src, ())
                            if first <= row < first + count), None)
                if hit is None:
                    if inner:
                        raise ValueError(f"{f.layer}: row {row} of {r.src} after rows of this band")
                    old.append(row)
                elif inner and inner[-1][0] == hit[0] and inner[-1][2] == hit[1]:
                    inner[-1] = (hit[0], inner[-1][1], hit[1] + 1)
                else:
                    inner.append((hit[0], hit[1], hit[1] + 1))
            port = None
            if old:
                port = f"in{len(ports)}"
                ports.append(InputPort(port, tuple(r.copies), tuple(e.stored_shape),
                                       tuple(row % e.slots for row in old)))
            mine.append(Piece(port, len(old), tuple(inner)))
        made.setdefault(f.layer, []).append((i, f.first, f.count))
        out.append(mine)
    return out, ports


def key(band: list[Firing], split: list[list[Piece]]) -> tuple:
    """What a band's model depends on (not its slot indices or views): bands of equal keys
    share one model."""
    return tuple((f.layer, f.count, tuple((p.gathered, p.inner, p.whole, r.pad_top, r.pad_bottom)
                                          for p, r in zip(ps, f.reads)), len(f.writes), f.sink)
                 for f, ps in zip(band, split))


def region_model(cnn: CNN, band: list[Firing], split: list[list[Piece]],
                 edges: dict, dtype: str, weights: Weights = FP32,
                 scales: Mapping[str, TensorScale] | None = None,
                 per_layer: tuple[Mapping[str, str], Mapping[str, Weights]] | None = None
                 ) -> onnx.ModelProto:
    """The band's model (`split`: pieces(band, edges)[0]; `edges`: the manifest's edges;
    `weights`: how parameters are stored, deploy/quant/stored.py; `scales`: an int8 band's
    scales by layer, deploy/steps/storage.py). Rows one firing hands to the next inside the
    band carry their stored values (`results`: each firing's output as stored, NCHW).
    `per_layer`: (each layer's output type, each layer's weights) of a plan with a precision
    per layer; each firing then stores and holds its weights at its own layer's."""
    b = Builder(dtype, weights, scales)
    elem = ONNX_TYPE[dtype]
    if per_layer is not None:
        b.stored.update(per_layer[0])
    inputs, outputs, results = [], [], []
    declared: set[str] = set()
    n_out = n_sink = 0
    for f, ps in zip(band, split):
        layer = cnn.layer(f.layer)
        if per_layer is not None:
            b.dtype, b.weights = per_layer[0][f.layer], per_layer[1][f.layer]
            elem = ONNX_TYPE[b.dtype]
        xs, shapes = [], []
        for r, p in zip(f.reads, ps):
            n, c, h, w = (int(v) for v in cnn.edge_shape(r.src, f.layer))
            parts = []
            if p.port is not None:
                e = edges[r.copies[0]]
                if p.port not in declared:
                    declared.add(p.port)
                    inputs.append(helper.make_tensor_value_info(
                        p.port, ONNX_TYPE[e.dtype] if e.dtype else elem, e.stored_shape))
                if p.whole:
                    x = p.port
                    if e.layout != "nchw":
                        x = b.node("Transpose", [x], perm=[1, 2, 0, 3])
                    xs.append(storage.load(b, x, r.src))
                    shapes.append((n, c, h, w))
                    continue
                idx = f"{p.port}_idx"
                inputs.append(helper.make_tensor_value_info(idx, TensorProto.INT32, [p.gathered]))
                parts.append(_channels_first(b, b.node("Gather", [p.port, idx], axis=0),
                                             [p.gathered, n, c, w]))
            # the rows of one stored tensor (ring rows and rows computed in this band) are
            # joined as stored and read once: an int8 window is one DequantizeLinear, which
            # ONNX Runtime fuses with the layer into its integer kernel
            for g, a, z in p.inner:
                y = results[g]
                if a == 0 and z == band[g].count:
                    parts.append(y)
                else:
                    parts.append(b.node("Slice", [y, b.const(b.tmp("a"), np.array([a], np.int64)),
                                                  b.const(b.tmp("z"), np.array([z], np.int64)),
                                                  b.const(b.tmp("axis"), np.array([2], np.int64))]))
            xs.append(storage.load(b, parts[0] if len(parts) == 1 else b.node("Concat", parts, axis=2),
                                   r.src))
            shapes.append((n, c, len(r.rows), w))
        y = storage.store(b, layer_core(b, _shaped(layer, f), xs, shapes, None, False), f.layer)
        results.append(y)
        n, c, _, w = (int(v) for v in layer.output_shape)
        names = [f"out{n_out + j}" for j in range(len(f.writes))]
        n_out += len(f.writes)
        if f.sink:
            names.append(f"sink{n_sink}")
            n_sink += 1
        if not names:
            continue
        stored_y = _rows_first(b, y, [n, c, f.count, w])
        for name in names:
            b.nodes.append(helper.make_node("Identity", [stored_y], [name]))
            outputs.append(helper.make_tensor_value_info(name, elem, [f.count, n, c, w]))
    graph = helper.make_graph(b.nodes, f"region_{band[0].layer}", inputs, outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="memtrade.deploy")
    model.ir_version = IR_VERSION
    return model


def _shaped(layer: Layer, f: Firing) -> Layer:
    """The layer as it computes firing `f`: its output rows only and, for a window op, the
    padding rows of this window as its vertical pads (the window reads only real rows)."""
    n, c, _, w = layer.output_shape
    if layer.op in WINDOW_OPS and f.reads:
        pads = WindowAttrs.of(layer).pad
        # ceil_mode stays: the rows are cut to exactly the windows (the same count either
        # way), and the columns still need it (GoogLeNet's pools: 55 columns, not 56)
        layer = with_hyper(layer, pads=[f.reads[0].pad_top, pads[1], f.reads[0].pad_bottom,
                                        pads[3]])
    return replace(layer, output_shape=(n, c, f.count, w))


def _rows_first(b: Builder, y: str, shape: list[int]) -> str:
    """NCHW -> [H, N, C, W]; a move of size-1 axes only (one row, batch 1) is a Reshape,
    which ONNX Runtime does without copying."""
    n, c, h, w = shape
    if h == 1 and n == 1 or h == 1 and c == 1:
        return b.node("Reshape", [y, b.const(b.tmp("shape"), np.array([h, n, c, w], np.int64))])
    return b.node("Transpose", [y], perm=[2, 0, 1, 3])


def _channels_first(b: Builder, x: str, shape: list[int]) -> str:
    """[H, N, C, W] -> NCHW (a Reshape when only size-1 axes move)."""
    h, n, c, w = shape
    if h == 1 and n == 1 or h == 1 and c == 1:
        return b.node("Reshape", [x, b.const(b.tmp("shape"), np.array([n, c, h, w], np.int64))])
    return b.node("Transpose", [x], perm=[1, 2, 0, 3])

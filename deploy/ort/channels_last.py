"""int8 tensors stored channels-last, so that ONNX Runtime's quantized kernels read and write
the arena without transposing: whole tensors as NHWC, rows rings as HNWC (each row NWC).

Why: an int8 step is DequantizeLinear -> op -> QuantizeLinear (deploy/steps/storage.py),
which ONNX Runtime fuses into its quantized kernel; on x86 its QLinearConv runs channels-last,
so at ORT_ENABLE_ALL the optimised step reads an NCHW input through `Transpose(perm=[0, 2,
3, 1])` and writes its output through `Transpose(perm=[0, 3, 1, 2])`; a rows-ring port
([slots, N, C, W]) is read through Gather (its rows) -> Transpose(perm=[1, 0, 3, 2]) and
written through Transpose(perm=[1, 0, 3, 2]). A whole-network session cancels those
transposes between layers; a step session pays them at every call, and ONNX Runtime's uint8
Transpose that swaps C and W is slow (measured on MobileNetV2's least-memory plan, one
thread: 470 of a region step's 610 us). When both ends of an edge are such steps the edge
holds the channels-last tensor instead. Its bytes, offsets and calls stay those of the plan
(batch 1: an NHWC tensor has the NCHW tensor's bytes; a ring slot holds one row either way).

How, on the graph ONNX Runtime optimised on this machine (made at run time, never shipped):
a stored tensor's dimensions are its manifest layout's permuted by `PERM[layout]`
(stored[j] = logical[perm[j]]). Every Transpose that reads a port, directly or through the
row operations of a ring (Gather and Concat on axis 0, Identity), gets the permutation that
reads the stored tensor (`reading`); every Transpose that writes into it (the port itself,
or rows a region step joins to the ring's rows) the one that writes it (`writing`). A port
is channels-last only when every such Transpose becomes trivial (it moves no dimension but
size-1 ones) and nothing else touches it; a trivial Transpose is removed or left as a copy.
Elementwise steps (QLinearAdd, Relu, Clip, Q/DQ on whole tensors of equal shapes, one scale
each) pass the layout on. The choice of edges is that of the NCHWc layout of fp32
deployments (deploy/ort/blocked.py `choose`): a producer that emits and consumers that all
accept. tests/deploy/ort/test_channels_last.py shows a step's Transposes around an
Identity stripped to the Identity, its port stored NHWC.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
from onnx import helper

from deploy.ort.blocked import StepForm, blocked_ports, choose as choose_stored, same_layout_math
from deploy.ort.blocked_rings import Graph, NodeAttrs
from deploy.runtime.manifest_records import Manifest

PERM = {"nchw": [0, 2, 3, 1], "hncw": [0, 1, 3, 2]}   # stored[j] = logical[PERM[j]]
BATCH_ROWS = [0, 2, 1, 3]     # Reshape [r, 1, C, W] -> [r, C, 1, W] as a permutation
NEUTRAL = {("com.microsoft", "QLinearAdd"), ("", "Add"), ("", "Sum"), ("", "Relu"),
           ("", "Clip"), ("", "Identity"), ("", "QuantizeLinear"), ("", "DequantizeLinear")}


@dataclass(frozen=True)
class Choice:
    """The edges stored channels-last; per step model, its ports so stored and their manifest
    layouts; per edge the Input's frame copy writes so, its axes in stored order."""
    edges: set[str]
    ports: dict[str, dict[str, str]]
    frame_orders: dict[str, list[int]]


def choose(manifest: Manifest, optimized: Callable[[str], onnx.ModelProto]) -> Choice:
    """The channels-last choice for `manifest`, `optimized(model)` giving a step model's graph
    as ONNX Runtime optimised it on this machine."""
    layouts: dict[str, dict[str, str]] = {}     # model -> port -> its edges' layout
    for _, _, step in manifest.steps():
        if step.model and any(b.kind == "edge" for b in step.bind):
            layouts.setdefault(step.model, {}).update(
                {b.name: manifest.edges[b.edges[0]].layout for b in step.bind if b.kind == "edge"})
    forms = {rel: step_form(optimized(rel), layouts[rel]) for rel in sorted(layouts)}
    edges = choose_stored(manifest, forms, 1, frames=True)
    ports = {}
    for _, _, step in manifest.steps():
        names = blocked_ports(step, edges) if step.model else frozenset()
        if names:
            ports[step.model] = {name: layouts[step.model][name] for name in names}
    return Choice(edges, ports, {eid: PERM[manifest.edges[eid].layout] for eid in edges})


def reading(perm: list[int], layout: str) -> list[int]:
    """The permutation giving what Transpose(`perm`) of the logical tensor gives, when read
    from the stored one."""
    inverse = [PERM[layout].index(d) for d in range(4)]
    return [inverse[p] for p in perm]


def writing(perm: list[int], layout: str) -> list[int]:
    """The permutation writing the stored tensor where Transpose(`perm`) wrote the logical."""
    return [perm[p] for p in PERM[layout]]


def trivial(perm: list[int], layout: str) -> bool:
    """`perm` moves no dimension but the batch (of size 1) of a ring's rows: it is a copy."""
    return perm == [0, 1, 2, 3] or layout == "hncw" and perm == [1, 0, 2, 3]


def _perm(node: onnx.NodeProto) -> list[int] | None:
    if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx"):
        return None
    return list(NodeAttrs.of(node).perm) or None


def _axis0(node: onnx.NodeProto) -> bool:
    return NodeAttrs.of(node).axis == 0


def _row_op(graph: Graph, node: onnx.NodeProto, name: str) -> bool:
    """`node` moves or masks whole rows of `name` (a ring's or a gathered window's): the
    layout of a row does not matter to it. A mask (deploy/steps/storage.py masked_rows) is
    `Where(Reshape(mask, [rows, 1, 1, 1]), rows, fill)`, one value per row."""
    if node.domain not in ("", "ai.onnx"):
        return False
    if node.op_type == "Gather":
        return node.input[0] == name and _axis0(node)
    if node.op_type == "Where":
        mask = graph.producer.get(node.input[0])
        return (node.input[1] == name and node.input[2] in graph.consts
                and mask is not None and mask.op_type == "Reshape")
    return node.op_type == "Identity" or node.op_type == "Concat" and _axis0(node)


def _batch_rows(graph: Graph, node: onnx.NodeProto, name: str, dims: list[int]) -> bool:
    """`node` reshapes rows [r, 1, C, W] of `name` to [r, C, 1, W] (rows as a batch, the
    1x1-conv-by-rows form, deploy/steps/rowwise.py): a Transpose(0, 2, 1, 3) in effect."""
    shape = graph.consts.get(node.input[1]) if len(node.input) > 1 else None
    if node.op_type != "Reshape" or node.input[0] != name or shape is None or dims[1] != 1:
        return False
    values = [int(v) for v in np.asarray(shape).ravel()]
    return len(values) == 4 and values[1:] == [dims[2], 1, dims[3]]


def _reach(graph: Graph, port: str, layout: str, dims: list[int]):
    """The Transposes reading input `port` (logical `dims`) as [(node, new perm)], the
    rows reshapes before them and the Transposes writing into the rows it is joined with, or
    None when something else touches it or a new perm is not trivial."""
    readers, writers, seen, todo = [], [], {port}, [port]
    while todo:
        name = todo.pop()
        if name in graph.outputs:
            return None
        for node in graph.users.get(name, []):
            perm = _perm(node)
            if perm is not None:
                readers.append((node, reading(perm, layout)))
                continue
            if layout == "hncw" and _batch_rows(graph, node, name, dims):
                after = graph.users.get(node.output[0], [])
                perms = [_perm(n) for n in after]
                if not after or None in perms or node.output[0] in graph.outputs:
                    return None
                readers.append((node, [0, 1, 2, 3]))
                readers += [(n, reading([BATCH_ROWS[i] for i in p], layout))
                            for n, p in zip(after, perms)]
                continue
            if layout != "hncw" or not _row_op(graph, node, name):
                return None
            if node.op_type == "Concat":      # rows joined here: from the ring or written in
                for other in node.input:
                    if other in seen:
                        continue
                    source = graph.producer.get(other)
                    perm = _perm(source) if source is not None else None
                    if perm is None or len(graph.users.get(other, [])) != 1:
                        return None
                    writers.append((source, writing(perm, layout)))
                    seen.add(other)
            for out in node.output:
                if out not in seen:
                    seen.add(out)
                    todo.append(out)
    moves = readers + writers
    if not readers or not all(trivial(p, layout) for _, p in moves):
        return None
    return moves


def _written(graph: Graph, port: str, layout: str):
    """The Transpose writing output `port` and the Transposes reading it inside the step (a
    later member of a chain step, deploy/build/chains.py), [(node, new perm)] with the
    writer first, or None when anything else reads it or a new perm is not trivial."""
    node = graph.producer.get(port)
    if node is not None and node.op_type == "Identity":
        node = graph.producer.get(node.input[0])
    perm = _perm(node) if node is not None else None
    if perm is None or not trivial(writing(perm, layout), layout):
        return None
    readers = graph.users.get(node.output[0], [])
    if any(n.op_type != "Identity" or n.output[0] not in graph.outputs for n in readers):
        return None                  # the written tensor is read inside the step too
    moves = [(node, writing(perm, layout))]
    for reader in graph.users.get(port, []):
        perm = _perm(reader)
        if perm is None or not trivial(reading(perm, layout), layout):
            return None
        moves.append((reader, reading(perm, layout)))
    return moves


def step_form(model: onnx.ModelProto, layouts: dict[str, str]) -> StepForm:
    """What optimised step `model` allows, its ports bound to edges of `layouts` (port name
    -> manifest layout): the input ports it can read and the output ports it can write
    channels-last (the ports one Transpose writes, through Identity copies, go together), and
    whether it is elementwise on whole tensors (neutral)."""
    graph = Graph(model)
    form = StepForm()
    for port in graph.g.input:
        layout = layouts.get(port.name)
        if layout in PERM and _rank4(port) and _reach(graph, port.name, layout,
                                                      _dims(port)) is not None:
            form.accepts.add(port.name)
    by_writer: dict[int, set[str]] = {}
    for port in graph.g.output:
        layout = layouts.get(port.name)
        found = _written(graph, port.name, layout) if layout in PERM else None
        if found is not None:
            form.emits.add(port.name)
            by_writer.setdefault(id(found[0][0]), set()).add(port.name)
    form.groups = list(by_writer.values())
    ops = {(n.domain or "", n.op_type) for n in graph.g.node}
    if ops and ops <= NEUTRAL and set(layouts.values()) == {"nchw"}:
        form.neutral = same_layout_math(model, concat=False)
    elif set(layouts.values()) == {"hncw"}:
        form.neutral = _rows_elementwise(graph, layouts)
    return form


def _rows_elementwise(graph: Graph, layouts: dict[str, str]) -> bool:
    """A by-parts elementwise step: rows gathered from rings (masked per row), then only
    elementwise operations with one scale each, on rows of the same channels and width: the
    same whatever the layout of a row, so long as every ring shares it."""
    ports = [p for p in list(graph.g.input) + list(graph.g.output) if p.name in layouts]
    dims = [[d.dim_value for d in p.type.tensor_type.shape.dim] for p in ports]
    if not dims or any(len(d) != 4 or d[1:] != dims[0][1:] for d in dims):
        return False
    if any(int(np.prod(i.dims)) > 1 and i.data_type != onnx.TensorProto.INT64
           for i in graph.g.initializer):
        return False                 # a per-channel constant would meet rows in their layout
    aux = {i.name for i in list(graph.g.input) + list(graph.g.initializer) if i.name not in layouts}
    for node in graph.g.node:
        if all(x in aux for x in node.input if x) and node.op_type in ("Cast", "Reshape"):
            aux.update(node.output)       # a mask, one value per row
        elif node.op_type == "Gather" and node.input[0] in layouts and _axis0(node):
            continue
        elif node.op_type == "Where" and _row_op(graph, node, node.input[1]):
            continue
        elif (node.domain or "", node.op_type) not in NEUTRAL:
            return False
    return True


def strip(model: onnx.ModelProto, ports: dict[str, str]) -> onnx.ModelProto:
    """The optimised model reading and writing `ports` (name -> manifest layout) stored
    channels-last: the Transposes at those ports given their new permutations (removed where
    nothing is left to move), the ports declared in their stored dimensions (a neutral step's
    keep theirs: its math is the same in either layout)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = Graph(model)
    moves, declared = [], {}
    for port in graph.g.input:
        if port.name in ports:
            found = _reach(graph, port.name, ports[port.name], _dims(port))
            if found is not None:
                moves += found
                declared[port.name] = ports[port.name]
    for port in graph.g.output:
        if port.name in ports:
            found = _written(graph, port.name, ports[port.name])
            if found is not None:
                moves += found
                declared[port.name] = ports[port.name]
    done = set()
    for node, perm in moves:
        if id(node) in done:
            continue
        done.add(id(node))
        if perm == [0, 1, 2, 3]:
            node.op_type = "Identity"
            del node.attribute[:]
            del node.input[1:]          # a rows reshape's shape
        else:
            del node.attribute[:]
            node.attribute.append(helper.make_attribute("perm", perm))
    _drop_identities(model)
    used = {name for node in model.graph.node for name in node.input}
    for init in [i for i in model.graph.initializer if i.name not in used]:
        model.graph.initializer.remove(init)     # a rows reshape's shape
    for port in list(model.graph.input) + list(model.graph.output):
        if port.name in declared:
            dims = port.type.tensor_type.shape.dim
            old = [d.dim_value for d in dims]
            for d, p in zip(dims, PERM[declared[port.name]]):
                d.dim_value = old[p]
    del model.graph.value_info[:]    # shapes of changed values; ONNX Runtime infers them again
    return model


def _drop_identities(model: onnx.ModelProto) -> None:
    """Remove Identity nodes whose input is not a graph input and whose output is read
    inside the graph or is a graph output produced by nothing else (a copy of a graph input
    to a graph output, or one a graph output needs, stays a copy)."""
    g = model.graph
    inputs = {i.name for i in g.input}
    outputs = {o.name for o in g.output}
    for node in list(g.node):
        if node.op_type != "Identity" or node.domain not in ("", "ai.onnx"):
            continue
        src, dst = node.input[0], node.output[0]
        if dst in outputs:
            producer = next((n for n in g.node if src in n.output), None)
            users = [n for n in g.node if src in n.input]
            if src in inputs or src in outputs or producer is None or users != [node]:
                continue
            producer.output[list(producer.output).index(src)] = dst
        else:
            for other in g.node:
                for i, name in enumerate(other.input):
                    if name == dst:
                        other.input[i] = src
        g.node.remove(node)


def port_dims(model: onnx.ModelProto, name: str) -> list[int]:
    """The declared dimensions of graph input or output `name`."""
    return _dims(next(p for p in list(model.graph.input) + list(model.graph.output) if p.name == name))


def _dims(port: onnx.ValueInfoProto) -> list[int]:
    return [d.dim_value for d in port.type.tensor_type.shape.dim]


def _rank4(port: onnx.ValueInfoProto) -> bool:
    dims = port.type.tensor_type.shape.dim
    return len(dims) == 4 and all(d.HasField("dim_value") for d in dims)

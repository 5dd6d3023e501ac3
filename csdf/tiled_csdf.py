"""The SDF3/CSDF view of a partition with fused-tiled groups: one actor per group, firing
N x M times (one phase per tile, DeepThings' row-major task order).

Layers outside groups are as in csdf.to_csdf (a group's layers run whole there). A group's
inner tensors exist per tile inside its actor, so they are no channels. Its input channel is
consumed, per tile phase, by the input rows that tile newly reaches (the first tile of each
tile row; like csdf.to_csdf, halo rows re-read are not consumed twice), its output channel
produced a whole tile row of output rows at the last tile of each tile row. Channel names
stay "SRC->DST" of the CNN's edges, so a plan's buffer sizes apply as capacities.
"""
from __future__ import annotations

from csdf.model import CNN
from csdf.tiling import Group, tile_group
from csdf.to_csdf import add_self_loops, to_csdf
from sdf3.graph import Actor, Channel, Graph


def group_rates(cnn: CNN, group: Group) -> tuple[list[int], list[int]]:
    """(input rows consumed, output rows produced) per tile phase of a group's actor."""
    tiles = tile_group(cnn, list(group.layers), group.n, group.m)
    first = cnn.layer(group.layers[0])
    h_in = int(cnn.edge_shape(first.inputs[0], first.name)[2])
    cons, prod, reach = [], [], 0
    for t in tiles:
        new = max(0, t.in_h.stop - reach) if t.j == 0 else 0
        reach += new
        cons.append(new)
        prod.append(t.out_h.size if t.j == group.m - 1 else 0)
    cons[-1] += h_in - reach
    return cons, prod


def tiled_csdf(cnn: CNN, layers: list[str], phases: dict[str, int], groups: list[Group],
               name: str | None = None, self_loops: bool = False) -> Graph:
    """The CSDF graph of a partition whose `groups` (inside `layers`) run fused-tiled."""
    groups = [g for g in groups if g.layers[0] in layers]
    member = {layer: g for g in groups for layer in g.layers}
    base = to_csdf(cnn, layers, {**phases, **{layer: 1 for layer in member}}, name)
    graph = Graph(base.name)
    rates = {g.name: group_rates(cnn, g) for g in groups}
    for actor in base.actors.values():
        g = member.get(actor.name)
        if g is None:
            graph.add_actor(actor)
        elif actor.name == g.layers[0]:
            graph.add_actor(Actor(g.name, g.n * g.m, [1] * (g.n * g.m), type="FusedTiles"))
    for ch in base.channels:
        gs, gd = member.get(ch.src), member.get(ch.dst)
        if gs is not None and gs is gd:
            continue                                  # per tile, inside the group's actor
        src, prod = (gs.name, rates[gs.name][1]) if gs is not None else (ch.src, ch.prod)
        dst, cons = (gd.name, rates[gd.name][0]) if gd is not None else (ch.dst, ch.cons)
        graph.add_channel(Channel(ch.name, src, dst, prod, cons, ch.initial_tokens, ch.token_size,
                                  ch.src_port, ch.dst_port, ch.capacity))
    if self_loops:
        add_self_loops(graph)
    return graph

"""A deterministic topological order of actors that tolerates cycles (needed by the
demand-driven scheduler): strongly connected components in topological order, actors inside
a component and ties between components broken by the order in which they were added."""
from __future__ import annotations

import networkx as nx

from sdf3.graph import Graph


def actor_digraph(graph: Graph, self_loops: bool = False) -> nx.DiGraph:
    """The actors as a networkx DiGraph, one edge per connected actor pair."""
    g = nx.DiGraph()
    g.add_nodes_from(graph.actors)
    for ch in graph.channels:
        if self_loops or ch.src != ch.dst:
            g.add_edge(ch.src, ch.dst)
    return g


def topo_order(graph: Graph) -> list[str]:
    """Actors in topological order of the condensation; ties by insertion order."""
    index = {a: i for i, a in enumerate(graph.actors)}
    g = actor_digraph(graph)
    if nx.is_directed_acyclic_graph(g):
        return list(nx.lexicographical_topological_sort(g, key=index.__getitem__))
    cond = nx.condensation(g)
    members = {c: sorted(cond.nodes[c]["members"], key=index.__getitem__) for c in cond}
    order: list[str] = []
    for c in nx.lexicographical_topological_sort(cond, key=lambda c: index[members[c][0]]):
        order.extend(members[c])
    return order

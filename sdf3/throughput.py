"""Throughput by self-timed state-space execution, as SDF3's CSDF throughput analysis does.

Every actor fires as soon as it can (claiming inputs at the start, producing at the end);
the execution is deterministic, so its state eventually recurs, and the throughput is the
number of iterations in the recurrent cycle over its duration (iterations per time unit).

- Capacities become reverse channels holding `capacity - initial` tokens: a firing of the
  source claims room when it starts, a firing of the destination frees it when it ends.
- Auto-concurrency is unbounded unless a self-loop limits it (as in SDF3).
- Actors that share a processor follow a static order (e.g. the partition's schedule):
  `orders = {processor: [actor or (actor, phase), ...]}`, repeated cyclically; one firing at
  a time per processor.
- A graph that is not strongly connected is analysed per strongly connected component of
  the channels plus processor orders (channels between components are unbounded); the
  graph's throughput is the minimum. A component without a cycle (an actor free to fire
  without limit) has infinite throughput; a deadlocked one has 0.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import networkx as nx

from sdf3.graph import Graph
from sdf3.repetition import repetition_vector


@dataclass
class _Edge:
    src: str
    dst: str
    prod: list[int]
    cons: list[int]
    tokens: int


def _edges(graph: Graph, capacities: dict[str, int] | None) -> list[_Edge]:
    caps = {c.name: c.capacity for c in graph.channels if c.capacity is not None}
    caps.update(capacities or {})
    out = []
    for c in graph.channels:
        out.append(_Edge(c.src, c.dst, c.prod, c.cons, c.initial_tokens))
        cap = caps.get(c.name)
        if cap is not None and c.src != c.dst:
            if cap < c.initial_tokens:
                return []  # caller reports 0: no room even for the initial tokens
            out.append(_Edge(c.dst, c.src, c.cons, c.prod, cap - c.initial_tokens))
    return out


def _order_list(order) -> list[tuple[str, int | None]]:
    if hasattr(order, "firings"):
        order = order.firings
    return [(f, None) if isinstance(f, str) else (f[0], f[1]) for f in order]


def throughput(graph: Graph, capacities: dict[str, int] | None = None,
               orders: dict[str, object] | None = None, max_steps: int = 2_000_000) -> float:
    """Iterations per time unit of the self-timed execution (math.inf if unbounded)."""
    q = repetition_vector(graph)
    edges = _edges(graph, capacities)
    if not edges and any(c.capacity is not None or (capacities or {}).get(c.name) is not None
                         for c in graph.channels):
        return 0.0
    olists = {p: _order_list(o) for p, o in (orders or {}).items()}
    dep = nx.DiGraph()
    dep.add_nodes_from(graph.actors)
    for e in edges:
        dep.add_edge(e.src, e.dst)
    for seq in olists.values():
        names = list(dict.fromkeys(a for a, _ in seq))
        for a, b in zip(names, names[1:] + names[:1]):
            dep.add_edge(a, b)
    index = {a: i for i, a in enumerate(graph.actors)}
    best = math.inf
    for comp in sorted(nx.strongly_connected_components(dep), key=lambda c: min(map(index.get, c))):
        members = sorted(comp, key=index.get)
        inner = [e for e in edges if e.src in comp and e.dst in comp]
        if not inner and not any(a in comp for s in olists.values() for a, _ in s):
            continue  # a lone actor without self-loop: unlimited auto-concurrency
        comp_orders = {p: s for p, s in olists.items() if s and s[0][0] in comp}
        best = min(best, _component(graph, members, inner, comp_orders, q, max_steps))
        if best == 0:
            break
    return best


def _component(graph: Graph, members: list[str], edges: list[_Edge],
               orders: dict[str, list[tuple[str, int | None]]], q: dict[str, int],
               max_steps: int) -> float:
    n = len(members)
    idx = {a: i for i, a in enumerate(members)}
    nph = [graph.actors[a].phases for a in members]
    et = [[graph.actors[a].exec_time(p) for p in range(graph.actors[a].phases)] for a in members]
    tok = [e.tokens for e in edges]
    ins = [[] for _ in range(n)]
    outs = [[] for _ in range(n)]
    for k, e in enumerate(edges):
        ins[idx[e.dst]].append(k)
        outs[idx[e.src]].append(k)
    cons = [e.cons for e in edges]
    prod = [e.prod for e in edges]
    proc_of = [-1] * n
    plist = list(orders.values())
    for pi, seq in enumerate(plist):
        for a, _ in seq:
            proc_of[idx[a]] = pi
    on_proc = [[idx[a] for a in dict.fromkeys(a for a, _ in seq)] for seq in plist]
    pos = [0] * len(plist)
    busy = [False] * len(plist)
    ph = [0] * n
    ref = 0
    active: list[tuple[int, int, int, int]] = []  # (end time, seq, actor, phase)
    seq_no = 0
    t = 0
    ref_starts = 0
    seen: dict[tuple, tuple[int, int]] = {}
    cand = set(range(n))
    starts_now = 0
    limit_now = 10 * sum(q[a] for a in members) + 10
    for _ in range(max_steps):
        # start everything that can start at time t
        while cand:
            for a in sorted(cand):
                cand.discard(a)
                while True:
                    p = ph[a]
                    pi = proc_of[a]
                    if pi >= 0:
                        if busy[pi]:
                            break
                        want = plist[pi][pos[pi]]
                        if want[0] != members[a] or (want[1] is not None and want[1] != p):
                            break
                    if any(tok[k] < cons[k][p] for k in ins[a]):
                        break
                    for k in ins[a]:
                        tok[k] -= cons[k][p]
                    if pi >= 0:
                        busy[pi] = True
                        pos[pi] = (pos[pi] + 1) % len(plist[pi])
                    if a == ref and p == 0:
                        ref_starts += 1
                        state = (tuple(tok), tuple(ph), tuple(pos), tuple(busy),
                                 tuple(sorted((end - t, b, bp) for end, _, b, bp in active)))
                        if state in seen:
                            t0, s0 = seen[state]
                            iters = (ref_starts - s0) * nph[ref] / q[members[ref]]
                            return math.inf if t == t0 else iters / (t - t0)
                        seen[state] = (t, ref_starts)
                    heapq.heappush(active, (t + et[a][p], seq_no, a, p))
                    seq_no += 1
                    ph[a] = p + 1 if p + 1 < nph[a] else 0
                    starts_now += 1
                    if starts_now > limit_now:
                        return math.inf  # a cycle of zero-time firings
            # zero-time firings end at once and may enable more
            while active and active[0][0] == t:
                _finish(heapq.heappop(active), tok, outs, prod, proc_of, busy, cand, edges, idx, on_proc)
        if not active:
            return 0.0  # deadlock: nothing runs and nothing can start
        t_next = active[0][0]
        while active and active[0][0] == t_next:
            _finish(heapq.heappop(active), tok, outs, prod, proc_of, busy, cand, edges, idx, on_proc)
        t = t_next
        starts_now = 0
    raise RuntimeError(f"throughput: no recurrent state within {max_steps} steps")


def _finish(item, tok, outs, prod, proc_of, busy, cand, edges, idx, on_proc) -> None:
    _, _, a, p = item
    for k in outs[a]:
        tok[k] += prod[k][p]
        cand.add(idx[edges[k].dst])
    cand.add(a)
    pi = proc_of[a]
    if pi >= 0:
        busy[pi] = False
        cand.update(on_proc[pi])  # the next actor in this processor's order may start


def orders_by_processor(graph: Graph, firings) -> dict[str, list[tuple[str, int | None]]]:
    """Split one firing list (or Schedule) into static orders per `Actor.processor`, keeping
    the relative order: e.g. two partitions' schedules, concatenated, become the orders of
    the two processors they are mapped to."""
    orders: dict[str, list[tuple[str, int | None]]] = {}
    for a, p in _order_list(firings):
        orders.setdefault(graph.actors[a].processor, []).append((a, p))
    return orders

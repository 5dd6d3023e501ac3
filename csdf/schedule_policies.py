"""Phase-schedule policies besides the demand-driven one (csdf.partition_analysis), so that
the explorer can keep the schedule whose buffers take least memory after placement rather
than the one that keeps every edge smallest on its own.

- `asap_schedule`: self-timed, as soon as possible, sequentialised: sweep the actors in a
  given (topological) order, firing every one that is ready once per sweep, until each has
  run all its phases. Every layer starts as soon as its first window is in, so rows leave
  their buffers early and a chain of layers by parts flows as a wavefront: the edges hold a
  few rows each and little is kept for long (Lee & Messerschmitt's self-timed execution of
  a (C)SDF graph on one processor).
- `demand_schedule` with a reordered priority (csdf.partition_analysis): the explorer passes
  the whole-layer order of explorer.memory.reorder (Liberis & Lane) instead of the topological one,
  which reorders the branches.

Rates are read per phase from the CSDF graph (`Channel.prod`/`cons`), so phases that carry
any number of rows work unchanged. Schedules are checked by `sdf3.schedule.run_schedule`
and the row replay of `row_buffers` like the demand-driven one.
"""
from __future__ import annotations

import heapq

from sdf3.errors import InputError
from sdf3.graph import Graph


def asap_schedule(graph: Graph, order: list[str]) -> list[str]:
    """One iteration of an acyclic CSDF graph, each actor through its phases once, fired in
    sweeps over `order`: in a sweep every actor that is ready (tokens on all its inputs for
    its next phase) when the sweep reaches it fires once. Returns the actor of every step.
    Event-driven: an actor is looked at again only after it or a producer of it fired."""
    index = {name: i for i, name in enumerate(order)}
    n = len(order)
    phases = [graph.actors[name].phases for name in order]
    tok: list[int] = []
    ins: list[list[tuple[int, list[int]]]] = [[] for _ in order]
    outs: list[list[tuple[int, list[int], int]]] = [[] for _ in order]
    for ch in graph.channels:
        if ch.src == ch.dst:
            continue
        k = len(tok)
        tok.append(ch.initial_tokens)
        ins[index[ch.dst]].append((k, ch.cons))
        outs[index[ch.src]].append((k, ch.prod, index[ch.dst]))
    nxt = [0] * n
    queued = [-1] * n                      # the sweep an actor is queued for
    heap = [(0, a) for a in range(n)]      # (sweep, position in order): already a heap
    for a in range(n):
        queued[a] = 0
    firings: list[str] = []
    pop, push = heapq.heappop, heapq.heappush
    wake = [[a] + [d for _, _, d in outs[a]] for a in range(n)]
    while heap:
        sweep, a = pop(heap)
        p = nxt[a]
        if p >= phases[a]:
            continue
        blocked = False
        for k, cons in ins[a]:
            if tok[k] < cons[p]:
                blocked = True             # woken again when a producer fires
                break
        if blocked:
            continue
        for k, prod, _ in outs[a]:
            tok[k] += prod[p]
        for k, cons in ins[a]:
            tok[k] -= cons[p]
        nxt[a] = p + 1
        firings.append(order[a])
        for b in wake[a]:
            when = sweep if b > a else sweep + 1
            if queued[b] < when and nxt[b] < phases[b]:
                queued[b] = when
                push(heap, (when, b))
    stuck = [a for a in range(n) if nxt[a] < phases[a]]
    if stuck:
        raise InputError(f"graph {graph.name}: deadlock, layer {order[stuck[0]]} cannot finish "
                         f"its {phases[stuck[0]]} phases")
    return firings

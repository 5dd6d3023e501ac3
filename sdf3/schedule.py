"""Single-processor schedules of one iteration and the buffer sizes they need.

`min_buffer_schedule` is demand-driven list scheduling: among the actors that can fire, it
first fires one whose firing raises no channel above the fill it already reached ("free"),
then one whose consumer is starved on a channel from it (a sink always counts as starved),
latest in topological order first within each class; only when neither exists does it fire
any other ready actor. A producer therefore runs only when something downstream needs its
tokens, which keeps every channel at the smallest fill the rates allow. It is event-driven:
each firing touches only the channels of the actor fired, O(firings x degree x log actors).

Buffer semantics are SDF3's: a firing claims its output space when it starts and releases
the input tokens it consumed when it ends, so in a sequential schedule a channel holds
`tokens before + produced` during a firing of its source (a self-loop with one token needs
2). See docs/sdf3_engine.md for where this is exact and where it is a heuristic.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from sdf3.analysis import Deadlock
from sdf3.graph import Graph
from sdf3.notation import compact as _compact
from sdf3.order import topo_order
from sdf3.repetition import repetition_vector


@dataclass
class Schedule:
    """One iteration on one processor: firings in order and the fill each channel reaches."""
    firings: list[tuple[str, int]]              # (actor, phase index), one per firing
    buffers: dict[str, int] = field(default_factory=dict)  # channel -> max tokens held

    def actors(self) -> list[str]:
        return [a for a, _ in self.firings]

    def compact(self) -> str:
        """The paper's notation, e.g. {[l1] x 5, [l2], [[l1], [l2]] x 27, [l2] x 4}."""
        return _compact(self.actors())

    def total(self) -> int:
        return sum(self.buffers.values())


def _simulate(graph: Graph, capacities: dict[str, int] | None,
              ) -> tuple[list[tuple[str, int]], dict[str, int], Deadlock | None]:
    """Fire actors one at a time until each has fired its repetition count, or nothing can.

    With `capacities` a firing also needs room for its output on each bounded channel.
    Returns (firings, max fill per channel, the deadlock or None).
    """
    q_named = repetition_vector(graph)
    names = topo_order(graph)                    # index = topological rank
    idx = {a: i for i, a in enumerate(names)}
    n = len(names)
    q = [q_named[a] for a in names]
    nph = [graph.actors[a].phases for a in names]
    chs = graph.channels
    m = len(chs)
    src = [idx[c.src] for c in chs]
    dst = [idx[c.dst] for c in chs]
    prod = [c.prod for c in chs]
    cons = [c.cons for c in chs]
    tok = [c.initial_tokens for c in chs]
    caps = capacities or {}
    cap = [caps.get(c.name) for c in chs]
    buf = list(tok)
    ins: list[list[int]] = [[] for _ in range(n)]
    outs: list[list[int]] = [[] for _ in range(n)]
    touch: list[list[int]] = [[] for _ in range(n)]
    for k in range(m):
        outs[src[k]].append(k)
        ins[dst[k]].append(k)
        touch[src[k]].append(k)
        if dst[k] != src[k]:
            touch[dst[k]].append(k)
    sink = [all(dst[k] == a for k in outs[a]) for a in range(n)]
    ph = [0] * n
    cnt = [0] * n
    missing = [0] * n
    demand = [0] * n
    short = [False] * m
    full = [False] * m
    heap: list[tuple[int, int, int]] = []

    def free(a: int) -> bool:
        # firing a raises no channel above the fill it already reached
        p = ph[a]
        for k in outs[a]:
            if tok[k] + prod[k][p] > buf[k]:
                return False
        return True

    def key(a: int) -> tuple[int, int, int]:
        # free firings first, then starved consumers' producers and sinks, then the rest;
        # latest in topological order first within each class
        if free(a):
            return (-1, -a, a)
        return (0 if (sink[a] or demand[a]) else 1, -a, a)

    def refresh(k: int) -> None:
        s, d = src[k], dst[k]
        ns = cnt[d] < q[d] and tok[k] < cons[k][ph[d]]
        if ns != short[k]:
            short[k] = ns
            if ns:
                missing[d] += 1
                if s != d:
                    demand[s] += 1
                    if demand[s] == 1 and missing[s] == 0 and cnt[s] < q[s]:
                        heapq.heappush(heap, key(s))
            else:
                missing[d] -= 1
                if missing[d] == 0 and cnt[d] < q[d]:
                    heapq.heappush(heap, key(d))
                if s != d:
                    demand[s] -= 1
        c = cap[k]
        if c is not None:
            nf = cnt[s] < q[s] and tok[k] + prod[k][ph[s]] > c
            if nf != full[k]:
                full[k] = nf
                if nf:
                    missing[s] += 1
                else:
                    missing[s] -= 1
                    if missing[s] == 0 and cnt[s] < q[s]:
                        heapq.heappush(heap, key(s))

    for k in range(m):
        refresh(k)
    for a in range(n):
        if missing[a] == 0 and cnt[a] < q[a]:
            heapq.heappush(heap, key(a))
    firings: list[tuple[str, int]] = []
    while heap:
        entry = heapq.heappop(heap)
        a = entry[2]
        if missing[a] or cnt[a] >= q[a]:
            continue
        now = key(a)
        if now != entry:
            heapq.heappush(heap, now)
            continue
        p = ph[a]
        firings.append((names[a], p))
        for k in outs[a]:
            t = tok[k] + prod[k][p]
            if t > buf[k]:
                buf[k] = t
            tok[k] = t
        for k in ins[a]:
            tok[k] -= cons[k][p]
            if cons[k][p]:  # its producer may now fire for free
                b = src[k]
                if b != a and missing[b] == 0 and cnt[b] < q[b]:
                    heapq.heappush(heap, key(b))
        cnt[a] += 1
        ph[a] = p + 1 if p + 1 < nph[a] else 0
        for k in touch[a]:
            refresh(k)
        if missing[a] == 0 and cnt[a] < q[a]:
            heapq.heappush(heap, key(a))
    buffers = {chs[k].name: buf[k] for k in range(m)}
    dead = None
    if len(firings) < sum(q):
        dead = _explain(graph, names, q, cnt, ph, tok, cap, ins, outs)
    return firings, buffers, dead


def _explain(graph, names, q, cnt, ph, tok, cap, ins, outs) -> Deadlock:
    """Name the first unfinished actor (topological order) and a channel it waits on."""
    chs = graph.channels
    fired = {names[a]: cnt[a] for a in range(len(names))}
    for a in range(len(names)):
        if cnt[a] >= q[a]:
            continue
        p = ph[a]
        for k in ins[a]:
            need = chs[k].cons[p]
            if tok[k] < need:
                return Deadlock(f"deadlock: actor {names[a]} (phase {p}, firing {cnt[a] + 1} of "
                                f"{q[a]}) waits for {need} tokens on channel {chs[k].name}, which "
                                f"holds {tok[k]}", names[a], chs[k].name, fired)
        for k in outs[a]:
            if cap[k] is not None and tok[k] + chs[k].prod[p] > cap[k]:
                return Deadlock(f"deadlock: actor {names[a]} (phase {p}, firing {cnt[a] + 1} of "
                                f"{q[a]}) waits for room for {chs[k].prod[p]} tokens on channel "
                                f"{chs[k].name}, which holds {tok[k]} of {cap[k]}",
                                names[a], chs[k].name, fired)
    raise AssertionError("no blocked actor found")  # unreachable: something is unfinished


def min_buffer_schedule(graph: Graph) -> Schedule:
    """A one-iteration single-processor schedule with small (minimal on chains) buffers.

    Raises sdf3.analysis.Deadlock naming actor and channel when an iteration cannot complete
    (a cycle without enough initial tokens), InconsistentGraph when no iteration exists.
    """
    firings, buffers, dead = _simulate(graph, None)
    if dead is not None:
        raise dead
    return Schedule(firings, buffers)


def check_deadlock(graph: Graph, capacities: dict[str, int] | None = None) -> None:
    """Raise Deadlock (naming the waiting actor and the channel) unless one iteration can
    complete with these channel capacities (tokens; channels not named are unbounded).

    Deadlock is a property of the graph, not of the firing order (CSDF is determinate and
    firing one ready actor never disables another), so one maximal run decides it."""
    for ch in graph.channels:
        if capacities and ch.name in capacities and capacities[ch.name] < ch.initial_tokens:
            raise Deadlock(f"deadlock: channel {ch.name} has capacity {capacities[ch.name]} below "
                           f"its {ch.initial_tokens} initial tokens", ch.src, ch.name)
    _, _, dead = _simulate(graph, capacities)
    if dead is not None:
        raise dead


def is_deadlock_free(graph: Graph, capacities: dict[str, int] | None = None) -> bool:
    try:
        check_deadlock(graph, capacities)
    except Deadlock:
        return False
    return True


def run_schedule(graph: Graph, firings: list[tuple[str, int]] | list[str]) -> dict[str, int]:
    """Replay a given firing order and return the fill each channel reaches (claim-at-start).

    Raises Deadlock if a firing lacks input tokens. Lets callers check any schedule (e.g. one
    read back from a plan) against the buffers it was planned with."""
    tok = {c.name: c.initial_tokens for c in graph.channels}
    buf = dict(tok)
    ins = {a: [] for a in graph.actors}
    outs = {a: [] for a in graph.actors}
    for c in graph.channels:
        outs[c.src].append(c)
        ins[c.dst].append(c)
    ph = {a: 0 for a in graph.actors}
    for i, f in enumerate(firings):
        a = f[0] if isinstance(f, tuple) else f
        p = ph[a]
        for c in ins[a]:
            if tok[c.name] < c.cons[p]:
                raise Deadlock(f"schedule step {i}: actor {a} phase {p} needs {c.cons[p]} tokens on "
                               f"channel {c.name}, which holds {tok[c.name]}", a, c.name)
        for c in outs[a]:
            tok[c.name] += c.prod[p]
            buf[c.name] = max(buf[c.name], tok[c.name])
        for c in ins[a]:
            tok[c.name] -= c.cons[p]
        ph[a] = (p + 1) % graph.actors[a].phases
    return buf

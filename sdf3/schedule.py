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


@dataclass
class _Wiring:
    """A graph as arrays for a run: actors by their priority rank (index in `names`),
    channels by their index in graph.channels."""
    names: list[str]
    q: list[int]                    # firings per actor in one iteration
    nph: list[int]                  # phases per actor
    src: list[int]
    dst: list[int]
    prod: list[list[int]]
    cons: list[list[int]]
    tok: list[int]                  # initial tokens
    cap: list[int | None]           # capacity in tokens, None: unbounded
    ins: list[list[int]]            # channels into each actor
    outs: list[list[int]]           # channels out of each actor
    touch: list[list[int]]          # channels at either end of each actor
    sink: list[bool]                # only self-loops leave it


def _wire(graph: Graph, names: list[str], q: list[int],
          capacities: dict[str, int] | None) -> _Wiring:
    idx = {a: i for i, a in enumerate(names)}
    n = len(names)
    chs = graph.channels
    src = [idx[c.src] for c in chs]
    dst = [idx[c.dst] for c in chs]
    caps = capacities or {}
    ins: list[list[int]] = [[] for _ in range(n)]
    outs: list[list[int]] = [[] for _ in range(n)]
    touch: list[list[int]] = [[] for _ in range(n)]
    for k in range(len(chs)):
        outs[src[k]].append(k)
        ins[dst[k]].append(k)
        touch[src[k]].append(k)
        if dst[k] != src[k]:
            touch[dst[k]].append(k)
    return _Wiring(names, q, [graph.actors[a].phases for a in names], src, dst,
                   [c.prod for c in chs], [c.cons for c in chs],
                   [c.initial_tokens for c in chs], [caps.get(c.name) for c in chs],
                   ins, outs, touch, [all(dst[k] == a for k in outs[a]) for a in range(n)])


def _simulate(graph: Graph, capacities: dict[str, int] | None,
              order: list[str] | None = None, free_first: bool = True,
              ) -> tuple[list[tuple[str, int]], dict[str, int], Deadlock | None]:
    """Fire actors one at a time until each has fired its repetition count, or nothing can.

    The ready actor fired next is the first by (class, latest rank): with `free_first`,
    class -1 for a firing that raises no channel above the fill it already reached; class
    0 for a producer of a starved consumer, or a sink; class 1 for the rest. Ranks are
    positions in `order`; without one, in the topological order, and one iteration is the
    repetition vector's; with one, each actor goes through its phases once.
    With `capacities` a firing also needs room for its output on each bounded channel.
    Returns (firings, max fill per channel, the deadlock or None).
    """
    if order is None:
        names = topo_order(graph)
        reps = repetition_vector(graph)
        q = [reps[a] for a in names]
    else:
        names = list(order)
        q = [graph.actors[a].phases for a in names]
    w = _wire(graph, names, q, capacities)
    firings, buf, cnt, ph, tok = _run(w, free_first)
    chs = graph.channels
    buffers = {chs[k].name: buf[k] for k in range(len(chs))}
    dead = None
    if len(firings) < sum(q):
        dead = _explain(graph, names, q, cnt, ph, tok, w.cap, w.ins, w.outs)
    return firings, buffers, dead


def _run(w: _Wiring, free_first: bool
         ) -> tuple[list[tuple[str, int]], list[int], list[int], list[int], list[int]]:
    """The firing loop of `_simulate`. Event-driven: a channel is `short` while its consumer
    waits for tokens on it and `full` while its producer waits for room; an actor is ready
    when `missing` (its short inputs and full outputs) is 0, and `demand` counts its short
    outputs. Heap entries are re-checked when popped (a stale key is pushed again), and an
    actor is pushed whenever it may have become ready or its key may have dropped.
    Returns (firings, max fill per channel, firings and next phase per actor, tokens)."""
    names, q, nph, src, dst = w.names, w.q, w.nph, w.src, w.dst
    prod, cons, cap, ins, outs, touch, sink = w.prod, w.cons, w.cap, w.ins, w.outs, w.touch, w.sink
    tok = list(w.tok)
    buf = list(tok)
    n, m = len(names), len(src)
    ph = [0] * n
    cnt = [0] * n
    missing = [0] * n
    demand = [0] * n
    short = [False] * m
    full = [False] * m
    heap: list[tuple[int, int, int]] = []
    push, pop = heapq.heappush, heapq.heappop

    def free(a: int) -> bool:
        # firing a raises no channel above the fill it already reached
        p = ph[a]
        for k in outs[a]:
            if tok[k] + prod[k][p] > buf[k]:
                return False
        return True

    def key(a: int) -> tuple[int, int, int]:
        if free_first and free(a):
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
                        push(heap, key(s))
            else:
                missing[d] -= 1
                if missing[d] == 0 and cnt[d] < q[d]:
                    push(heap, key(d))
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
                        push(heap, key(s))

    for k in range(m):
        refresh(k)
    for a in range(n):
        if missing[a] == 0 and cnt[a] < q[a]:
            push(heap, key(a))
    firings: list[tuple[str, int]] = []
    while heap:
        entry = pop(heap)
        a = entry[2]
        if missing[a] or cnt[a] >= q[a]:
            continue
        now = key(a)
        if now != entry:
            push(heap, now)
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
            if free_first and cons[k][p]:  # its producer may now fire for free
                b = src[k]
                if b != a and missing[b] == 0 and cnt[b] < q[b]:
                    push(heap, key(b))
        cnt[a] += 1
        ph[a] = p + 1 if p + 1 < nph[a] else 0
        for k in touch[a]:
            refresh(k)
        if missing[a] == 0 and cnt[a] < q[a]:
            push(heap, key(a))
    return firings, buf, cnt, ph, tok


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


def demand_schedule(graph: Graph, order: list[str]) -> list[str]:
    """One iteration of a CSDF graph, each actor through its phases once, by the policy of
    `min_buffer_schedule` without its first class: the ready actor with a starved consumer
    (or none) latest in `order` first, else the ready actor latest in `order`. Returns the
    actor of every firing. Raises sdf3.analysis.Deadlock when the iteration cannot finish."""
    firings, _, dead = _simulate(graph, None, order, free_first=False)
    if dead is not None:
        raise dead
    return [a for a, _ in firings]


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

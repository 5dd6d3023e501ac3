"""Operator reordering for whole layers: Liberis & Lane, "Neural networks on microcontrollers:
saving memory at inference via operator reordering" (2019), Section 3.

The working set of an operator is its inputs and outputs plus every tensor produced earlier
and still to be read later; the peak of an execution order is the largest working set over
its operators. Liberis & Lane's memoised dynamic program finds the order with the least peak
over the states "tensors still to produce" (equivalently, operators already run, S):

    best(S) = min over ready o of max(ws(S, o), best(S + o))

Here it is solved forward, level by level of |S| (a bottleneck shortest path over the same
state graph, so the same optimum): peak(S + o) = min over (S, o) of max(peak(S), ws(S, o)),
with ws(S, o) = held(S) + outputs(o) (o's inputs are held, as o has not run). A level with
more than `width` states keeps the `width` best (least peak, then least held): a beam, the
bounded fallback for graphs the exact DP cannot finish; `Order.exact` says which happened.

Orders are chosen only under offset placements, whose buffers are tensors (one per
producer, read by all its consumers: explorer/memory/tensors.py), so a partition's tensors
are its producers' outputs (`partition_tensors`), as in Liberis & Lane's own example of a
tensor read by two operators.
"""
from __future__ import annotations

from dataclasses import dataclass

from explorer.memory.cache import RunCache

WIDTH = 2000          # states kept per level before the beam cuts in


@dataclass(frozen=True)
class Tensor:
    size: int
    producer: str | None             # None: present before the first operator
    consumers: tuple[str, ...] = ()  # () = kept to the end (a graph output)


@dataclass(frozen=True)
class Order:
    order: list[str]
    peak: int
    exact: bool                      # False when the beam dropped states


def peak(order: list[str], tensors: list[Tensor]) -> int:
    """Largest working set of `order` (every operator once, producers first)."""
    step = {o: i for i, o in enumerate(order)}
    end = len(order)
    alive = [0] * end
    for t in tensors:
        first = step[t.producer] if t.producer is not None else 0
        last = max((step[c] for c in t.consumers), default=end - 1) if t.consumers else end - 1
        for i in range(first, last + 1):
            alive[i] += t.size
    return max(alive, default=0)


def best_order(ops: list[str], tensors: list[Tensor], width: int = WIDTH) -> Order:
    """The order of `ops` with the least peak working set (exact unless the beam cut in).
    `ops` must be a valid order already (ties keep it: lower index first)."""
    index = {o: i for i, o in enumerate(ops)}
    n = len(ops)
    out = [0] * n
    ins: list[list[tuple[int, int]]] = [[] for _ in ops]    # (size, mask of its consumers)
    pred = [0] * n
    held0 = 0
    for t in tensors:
        cmask = 0
        for c in t.consumers:
            cmask |= 1 << index[c]
        if t.producer is None:
            held0 += t.size
        else:
            p = index[t.producer]
            out[p] += t.size
            for c in t.consumers:
                pred[index[c]] |= 1 << p
        for c in t.consumers:
            ins[index[c]].append((t.size, cmask))
    succ: list[list[int]] = [[] for _ in ops]
    for c in range(n):
        for p in range(n):
            if pred[c] >> p & 1:
                succ[p].append(c)
    # the beam's state: mask -> (peak, held, mask of the ops ready in it); only the ready
    # ops are tried, in index order (as a scan of every op would meet them)
    ready0 = sum(1 << o for o in range(n) if not pred[o])
    level: dict[int, tuple[int, int, int]] = {0: (0, held0, ready0)}
    parents: list[dict[int, tuple[int, int]]] = []
    exact = True
    for _ in range(n):
        nxt: dict[int, tuple[int, int, int]] = {}
        back: dict[int, tuple[int, int]] = {}
        for s, (pk, held, ready) in level.items():
            todo = ready
            while todo:
                bit = todo & -todo
                todo ^= bit
                o = bit.bit_length() - 1
                ws = held + out[o]
                s2 = s | bit
                p2 = pk if pk > ws else ws
                old = nxt.get(s2)
                if old is None or p2 < old[0]:
                    freed = sum(size for size, m in ins[o] if not m & ~s2)
                    if old is None:
                        ready2 = ready ^ bit
                        for c in succ[o]:
                            if not pred[c] & ~s2:
                                ready2 |= 1 << c
                    else:
                        ready2 = old[2]
                    nxt[s2] = (p2, ws - freed, ready2)
                    back[s2] = (s, o)
        if len(nxt) > width:
            exact = False
            keep = sorted(nxt, key=lambda m: (nxt[m][0], nxt[m][1], m))[:width]
            nxt = {m: nxt[m] for m in keep}
        level = nxt
        parents.append(back)
    (s, (pk, _, _)), = level.items()
    order: list[str] = []
    for back in reversed(parents):
        s, o = back[s]
        order.append(ops[o])
    order.reverse()
    return Order(order, pk, exact)


def partition_tensors(app, part_name: str, sizes: dict[str, int] | None = None) -> list[Tensor]:
    """The partition's tensors as explorer.memory.tensors stores them, one per producer: read
    inside only, from its producer to its last reader; also read by a later sequential stage,
    from its producer to the end; from an earlier sequential stage, from the first step to its
    last reader here; double-buffered for a parallel stage, two copies there throughout.
    `sizes` (edge name -> elements) replace whole tensors."""
    from csdf.model import edge_name
    from explorer.memory.lifetimes import group_index

    sizes = sizes or {}
    part = app.partition(part_name)
    cnn = app.cnns[part.cnn]
    inside = set(part.layers)
    group = group_index(app.pipelines)
    where = {x: p.name for p in app.partitions_of(part.cnn) for x in p.layers}
    readers: dict[str, list[str]] = {}
    for src, dst in cnn.edges():
        if src in inside or dst in inside:
            readers.setdefault(src, []).append(dst)
    out: list[Tensor] = []
    for src, dsts in readers.items():
        size = max(sizes.get(edge_name(cnn.name, src, d), 0) or int(_elements(cnn, src, d))
                   for d in dsts)
        mine = src in inside
        here = tuple(d for d in dsts if d in inside)
        away = [where.get(x) for x in ([src] if not mine else []) + [d for d in dsts if d not in inside]]
        if any(part_name in group and group.get(p) == group[part_name] for p in away):
            out += [Tensor(size, None), Tensor(size, None)]
        elif mine:
            out.append(Tensor(size, src, () if away else here))
        else:
            out.append(Tensor(size, None, here))
    return out


def _elements(cnn, src: str, dst: str) -> int:
    n = 1
    for v in cnn.edge_shape(src, dst):
        n *= int(v)
    return n


def partition_order(app, part_name: str, sizes: dict[str, int] | None = None,
                    kept: RunCache | None = None) -> Order:
    """The least-peak order of a partition's whole layers; `kept` holds them per CNN by
    (partition layers, sizes of its edges)."""
    part = app.partition(part_name)
    cnn = app.cnns[part.cnn]
    if kept is None:
        inside = set(part.layers)
        return best_order([x for x in cnn.order() if x in inside],
                          partition_tensors(app, part_name, sizes))
    cache = kept.of(cnn).orders
    fast = (part_name, tuple(part.layers), tuple(map(tuple, app.pipelines)))
    if not sizes and fast in cache:
        return cache[fast]
    tensors = partition_tensors(app, part_name, sizes)
    key = (part_name, tuple(part.layers), tuple(t.size for t in tensors))
    if not sizes:
        cache[fast] = cache.get(key) or best_order([x for x in cnn.order() if x in set(part.layers)],
                                                    tensors)
        cache.setdefault(key, cache[fast])
    if key not in cache:
        inside = set(part.layers)
        ops = [x for x in cnn.order() if x in inside]
        cache[key] = best_order(ops, tensors)
    return cache[key]

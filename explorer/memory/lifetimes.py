"""Edge uses: when, and in which partition, each buffer of an application holds data.

An `EdgeUse` is one buffer's worth of an edge: its size in elements and the steps it is
alive, as `(partition, first_step, last_step)` spans (inclusive, 0-based) in that
partition's flat schedule (one entry per firing, so schedules with phases work unchanged).

- Edge inside one partition: alive from the first firing of its producer to the last
  firing of its consumer (the paper's interval, Section 5).
- Edge crossing two partitions of one pipeline set of J: double-buffered, two uses "(1)"
  and "(2)" (the paper's e23(1), e23(2)), each spanning both partitions whole: while one
  copy is read by the consumer stage the producer stage fills the other.
- Edge crossing partitions in different sets of J (sequential stages of one CNN): one use,
  from its producer's step to the end of the producer's partition and from the start of
  the consumer's partition to its consumer's step.
- In both crossing cases any partition of the same CNN between the two (in application
  order) is spanned whole too: the data waits there (the paper has no such edge; this
  keeps skip edges over a middle stage safe).

A whole tensor stored by rows (one end of its edge runs by parts) may also carry `Rows`: the
steps each row holds data (explorer/memory/staircase.py). Offset planners then let other buffers use
a row's bytes before it is written and after its last read (explorer/memory/placement/rows.py);
Algorithm 1 and `conflict` keep judging the whole interval.

Uses come out in Algorithm 1's visiting order: partitions in application order, then the
partition's edges by the producer's first step, then the consumer's partition and step;
a crossing edge is visited with its producer's partition.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from math import prod

from csdf.model import CNN, edge_name
from explorer.memory.cache import RunCache
from sdf3.errors import InputError

Span = tuple[str, int, int]


@dataclass(frozen=True)
class Rows:
    """Row-by-row life of a whole tensor stored row after row (rows outermost): row r, the
    elements [r * row, (r + 1) * row) of its buffer, holds data from step first[r] to step
    last[r] (inclusive) of the use's one partition. Both tuples are nondecreasing (a
    producer writes rows in order; a row is freed once no later window reads it or an
    earlier row), so the rows alive at a step are one contiguous run."""
    row: int                    # elements per row
    first: tuple[int, ...]
    last: tuple[int, ...]
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # hashed once: placements are cached by their uses (explorer.memory.placement.place),
        # and a tensor of a plan by rows has thousands of rows
        object.__setattr__(self, "_hash", hash((self.row, self.first, self.last)))

    def __hash__(self) -> int:
        return self._hash

    def live(self, step: int) -> tuple[int, int]:
        """[lo, hi): the rows holding data at `step` (lo >= hi: none)."""
        return bisect_left(self.last, step), bisect_right(self.first, step)


@dataclass(frozen=True)
class EdgeUse:
    name: str                   # csdf.model.edge_name, with "(1)"/"(2)" for the copies
    cnn: str
    size: int                   # elements
    spans: tuple[Span, ...]     # (partition, first_step, last_step), inclusive
    rows: Rows | None = None    # finer life of a whole tensor stored by rows (one span)
    # the plan's edge names this use stores: () = itself; a tensor use (explorer/memory/
    # tensors.py) lists every (producer, consumer) edge reading the one buffer
    edges: tuple[str, ...] = ()

    @property
    def stored(self) -> tuple[str, ...]:
        """Edge names held in this use's buffer."""
        return self.edges or (self.name,)

    def alive(self, step: int) -> int:
        """Elements holding data at `step` of its (first) partition's span."""
        _, a, b = self.spans[0]
        if not a <= step <= b:
            return 0
        if self.rows is None:
            return self.size
        lo, hi = self.rows.live(step)
        return max(0, hi - lo) * self.rows.row


def cnn_edges(cnn: CNN, cache: RunCache | None = None) -> list[tuple[str, str, str, int]]:
    """(src, dst, name, elements) of every edge, kept in `cache` (CNN.edges() sorts)."""
    kept = None if cache is None else cache.of(cnn)
    if kept is not None and kept.edges is not None:
        return kept.edges
    out = [(u, v, edge_name(cnn.name, u, v), prod(cnn.edge_shape(u, v))) for u, v in cnn.edges()]
    if kept is not None:
        kept.edges = out
    return out


def group_index(pipelines: list[list[str]]) -> dict[str, int]:
    """Partition -> index of its set of J."""
    return {name: i for i, group in enumerate(pipelines) for name in group}


def conflict(a: EdgeUse, b: EdgeUse, group: dict[str, int]) -> bool:
    """The conflict rule (docs/architecture.md): some partition of `a` runs in parallel
    with some partition of `b` (same set of J, different partitions), or they share a
    partition and their step intervals there overlap. Partitions absent from `group` are
    alone in their set."""
    for pa, a0, a1 in a.spans:
        for pb, b0, b1 in b.spans:
            if pa == pb:
                if a0 <= b1 and b0 <= a1:
                    return True
            elif pa in group and group.get(pb) == group[pa]:
                return True
    return False


def _positions(schedule: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, name in enumerate(schedule):
        if name not in first:
            first[name] = i
        last[name] = i
    return first, last


def edge_uses(app, schedules: dict[str, list[str]] | None = None,
              sizes: dict[str, int] | None = None,
              rows: dict[str, Rows] | None = None, cache: RunCache | None = None
              ) -> list[EdgeUse]:
    """The edge uses of `app` in Algorithm 1's visiting order.

    `schedules` (qualified partition name -> flat firing list) win over the app's explicit
    `schedules`, which win over the default (the partition's layers in CNN.order()).
    `sizes` (edge name -> elements) replace whole tensors; a missing edge holds its whole
    tensor. Edges crossing partitions should be given whole (docs/architecture.md).
    `cache` keeps each CNN's edge list."""
    schedules = schedules or {}
    sizes = sizes or {}
    rows = rows or {}
    group = group_index(app.pipelines)
    where: dict[str, dict[str, int]] = {}            # cnn -> layer -> partition index
    pos: list[tuple[dict[str, int], dict[str, int]]] = []
    lengths: list[int] = []
    names = [p.name for p in app.partitions]
    for i, part in enumerate(app.partitions):
        sched = schedules.get(part.name) or app.schedules.get(part.name) or part.layers
        first, last = _positions(sched)
        pos.append((first, last))
        lengths.append(len(sched))
        layer_of = where.setdefault(part.cnn, {})
        for layer in part.layers:
            layer_of[layer] = i
    keyed: list[tuple[tuple[int, int, int, int, int], EdgeUse]] = []
    for cnn_name, cnn in app.cnns.items():
        layer_of = where.get(cnn_name, {})
        for src, dst, name, elements in cnn_edges(cnn, cache):
            try:
                i, j = layer_of[src], layer_of[dst]
                s = pos[i][0][src]
                d_first, d_last = pos[j][0][dst], pos[j][1][dst]
            except KeyError as err:
                raise InputError(f"app {app.name}: layer {cnn_name}.{err.args[0]} is in no partition "
                                 f"or never fires in its partition's schedule") from None
            size = sizes.get(name, elements)
            if i == j:
                life = rows.get(name)
                if life is not None and life.row * len(life.first) != size:
                    life = None
                keyed.append(((i, s, j, d_first, 0), EdgeUse(name, cnn_name, size,
                                                             ((names[i], s, pos[i][1][dst]),), life)))
                continue
            lo, hi = min(i, j), max(i, j)
            middle = tuple((names[k], 0, lengths[k] - 1) for k in range(lo + 1, hi)
                           if app.partitions[k].cnn == cnn_name)
            if names[i] in group and group.get(names[j]) == group[names[i]]:
                spans = ((names[i], 0, lengths[i] - 1),) + middle + ((names[j], 0, lengths[j] - 1),)
                for copy in (1, 2):
                    keyed.append(((i, s, j, d_first, copy),
                                  EdgeUse(edge_name(cnn_name, src, dst, copy), cnn_name, size, spans)))
            else:
                spans = ((names[i], s, lengths[i] - 1),) + middle + ((names[j], 0, d_last),)
                keyed.append(((i, s, j, d_first, 0), EdgeUse(name, cnn_name, size, spans)))
    keyed.sort(key=lambda kv: kv[0])
    return [use for _, use in keyed]

"""The SDF3 XML that `explore APP --out DIR` writes for each partition of the chosen plan.

Each file is the partition's CSDF graph (csdf.to_csdf, one self-loop per actor so SDF3 runs a
layer's phases one after another) with
- the plan's buffer size in rows as each internal channel's capacity, which sdf3.xml writes
  as a reverse channel holding the capacity as initial tokens (what SDF3's analyses read);
- per-phase execution times from the throughput evaluator, as integers in TIME_UNIT: a
  layer's time in Φ phases (explorer.throughput.evaluator.Evaluator.layer_ms) split evenly over its
  phases, the remainder of the integer division going to the first phases so the phases add
  up to the layer's time exactly.
SDF3's `thr(g)` of such a file is then in iterations (frames) per nanosecond.
"""
from __future__ import annotations

from pathlib import Path

from sdf3.graph import Graph

TIME_UNIT = "ns"
PER_MS = 1_000_000            # TIME_UNIT per millisecond


def phase_times(total_ms: float, phases: int) -> list[int]:
    """`total_ms` split over `phases` phases, integers in TIME_UNIT summing to its rounding."""
    total = max(0, round(total_ms * PER_MS))
    base, extra = divmod(total, phases)
    return [base + (1 if i < extra else 0) for i in range(phases)]


def partition_graph(app, plan, part, evaluator=None) -> Graph:
    """The CSDF graph of partition `part` under `plan`, with capacities and (when an
    evaluator is given) execution times."""
    from csdf.to_csdf import to_csdf

    cnn = app.cnns[part.cnn]
    groups = {}
    if plan.tilings.get(part.cnn):
        # fused-tiled groups: one actor per group, one phase per tile (csdf/tiled_csdf.py)
        from csdf.tiled_csdf import tiled_csdf
        tiled = list(plan.tilings[part.cnn])
        groups = {g.name: g for g in tiled}
        graph = tiled_csdf(cnn, part.layers, plan.phases[part.cnn], tiled,
                           part.name.replace(".", "_"), self_loops=True)
    else:
        graph = to_csdf(cnn, part.layers, plan.phases[part.cnn], name=part.name.replace(".", "_"),
                        self_loops=True)
    named = {str(k): e for k, e in plan.edges.items() if k.cnn == part.cnn}
    for ch in graph.channels:          # channel "src->dst": the edge's name in its CNN
        e = named.get(f"{part.cnn}.{ch.name}")
        if ch.src != ch.dst and e is not None:
            ch.capacity = int(e.rows)
    if evaluator is not None:
        for actor in graph.actors.values():
            if actor.name in groups:
                from explorer.tiling.fused import group_ms
                ms = group_ms(evaluator, part.cnn, groups[actor.name], part.processor)
            else:
                ms = evaluator.layer_ms(part.cnn, actor.name, actor.phases, part.processor)
            actor.exec_times = phase_times(ms, actor.phases)
    return graph


def write_partitions(app, plan, out: Path, evaluator=None) -> list[Path]:
    """SDF3 XML of every partition of `plan`, `<cnn>.<partition>.xml` in `out`."""
    from sdf3.xml import write_xml

    paths = []
    for part in app.partitions:
        path = Path(out) / f"{part.name}.xml"
        write_xml(partition_graph(app, plan, part, evaluator), path)
        paths.append(path)
    return paths

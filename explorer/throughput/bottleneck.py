"""Which stage sets a CNN's frame time: the answer to "why is this target missed?".

A CNN's frame time is the sum of the periods of the pipeline sets holding its partitions, and
a set's period is its busiest processor's sum of stage times (explorer/throughput/evaluator.py
`pipeline_sets`, `busiest`, which this module asks rather than repeats).
The bottleneck of a CNN is the set contributing the largest period, the processor that sets
that period and the partitions it runs there: speeding anything else up does not raise the
CNN's fps.
"""
from __future__ import annotations

from dataclasses import dataclass

Phases = dict[str, dict[str, int]]


@dataclass(frozen=True)
class Bottleneck:
    cnn: str
    processor: str
    partitions: tuple[str, ...]     # the stages on that processor in that set
    period_ms: float                # the set's period
    frame_ms: float                 # the CNN's whole frame time (>= period_ms)

    def line(self) -> str:
        share = "" if self.period_ms >= self.frame_ms else \
            f" of the {self.frame_ms:.2f} ms frame"
        return (f"set by {self.processor} running {', '.join(self.partitions)}: "
                f"{self.period_ms:.2f} ms a frame{share}")


def bottlenecks(evaluator, phases: Phases | None = None) -> dict[str, Bottleneck]:
    """Per CNN, the stage that sets its frame time under `phases` (missing layers: whole)."""
    app = evaluator.app
    times = {p.name: evaluator.partition_ms(p.name, phases) for p in app.partitions}
    frame = {cnn: 0.0 for cnn in app.cnns}
    worst: dict[str, tuple[float, str, tuple[str, ...]]] = {}
    for group in evaluator.pipeline_sets():
        proc, names, period = evaluator.busiest(group, times)
        for cnn in {app.partition(n).cnn for n in group}:
            frame[cnn] += period
            if cnn not in worst or period > worst[cnn][0]:
                worst[cnn] = (period, proc, tuple(names))
    return {cnn: Bottleneck(cnn, proc, names, period, frame[cnn])
            for cnn, (period, proc, names) in worst.items()}

"""Which stage sets a CNN's frame time: the answer to "why is this target missed?".

A CNN's frame time is the sum of the periods of the pipeline sets holding its partitions, and
a set's period is its busiest processor's sum of stage times (explorer/throughput/evaluator.py).
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
    groups = [list(g) for g in (app.pipelines or [])]
    seen = {name for g in groups for name in g}
    groups += [[p.name] for p in app.partitions if p.name not in seen]
    frame = {cnn: 0.0 for cnn in app.cnns}
    worst: dict[str, tuple[float, str, tuple[str, ...]]] = {}
    for group in groups:
        per_proc: dict[str, list[str]] = {}
        for name in group:
            per_proc.setdefault(app.partition(name).processor, []).append(name)
        proc, names = max(per_proc.items(), key=lambda kv: sum(times[n] for n in kv[1]))
        period = sum(times[n] for n in names)
        for cnn in {app.partition(n).cnn for n in group}:
            frame[cnn] += period
            if cnn not in worst or period > worst[cnn][0]:
                worst[cnn] = (period, proc, tuple(names))
    return {cnn: Bottleneck(cnn, proc, names, period, frame[cnn])
            for cnn, (period, proc, names) in worst.items()}

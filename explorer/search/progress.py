"""What a search reports while it runs (one line per step of a stage) and when it ends (the
seconds of each stage).

Every stage reports: NSGA-II after each generation (generation 0 is the initial
population), path relinking and local search after each slice of a round's batch, so on a
terminal no stage is silent for longer than one generation or one slice.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable


@dataclass
class GenerationStats:
    generation: int           # the stage's step: an NSGA-II generation, a round
    generations: int          # the steps it plans
    evaluations: int          # fitness requests so far (cache hits included)
    unique: int               # distinct chromosomes actually evaluated
    seconds: float
    front_size: int
    min_memory: int
    stage: str = "NSGA-II"    # binary NSGA-II / ladder NSGA-II / path relinking / local search
    last: bool = False        # the stage's last line (its last step, or stopped on time)
    unit: str = "gen"         # what a step is: "gen" (NSGA-II) or "round"

    @property
    def rate(self) -> float:
        return self.evaluations / self.seconds if self.seconds > 0 else 0.0

    @property
    def left(self) -> float:
        """Seconds the stage still needs at its mean pace so far (generation 0 is the
        initial population, a generation's worth of evaluations)."""
        done = self.generation + 1
        if self.last:
            return 0.0
        return self.seconds / done * (self.generations - self.generation) if done else 0.0

    def line(self) -> str:
        return (f"{self.stage}: {self.unit} {self.generation:>3}/{self.generations}  front "
                f"{self.front_size:>3}  min memory {self.min_memory / 2**20:8.3f} MB  "
                f"evaluations {self.evaluations} ({self.unique} unique)  {self.rate:7.1f} eval/s"
                f"  {self.seconds:6.1f} s, ~{self.left:.0f} s left in this stage")


Progress = Callable[[GenerationStats], None]


def stderr_progress(stats: GenerationStats) -> None:
    """On a terminal one line rewritten in place each step (a new line per stage);
    elsewhere (a log, CI) one line per stage, when it ends."""
    if sys.stderr.isatty():
        print("\r" + stats.line(), end="\n" if stats.last else "", file=sys.stderr, flush=True)
    elif stats.last:
        print(stats.line(), file=sys.stderr, flush=True)


@dataclass(frozen=True)
class StageTime:
    """One stage of a run: its name, wall seconds and the chromosomes it evaluated."""
    name: str
    seconds: float
    evaluations: int = 0


def stage_line(stages: list[StageTime] | tuple[StageTime, ...]) -> str:
    """'stages  a 1.2 s, b 3.4 s, ...' in the order they ran."""
    return "stages  " + ", ".join(f"{s.name} {s.seconds:.1f} s" for s in stages)

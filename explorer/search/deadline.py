"""A wall-clock budget for the search (`--time-limit SECONDS`, `search.time_limit`; issue 28).

The search's stages (NSGA-II generations of the binary and the ladder runs, rounds of path
relinking and of local search) ask `over(stage)` before each step; once the budget is spent
every later step is skipped and the search returns the front it has, so the outputs are
written as usual and the chosen plan is one the search really evaluated. A step already
running finishes (one generation's batch at most), so a run overshoots by at most one step.
Without a limit nothing changes: the same seed gives the same front.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Deadline:
    seconds: float | None = None               # None: no limit
    start: float = field(default_factory=time.perf_counter)
    stopped: str | None = None                 # the first stage the budget stopped

    def over(self, stage: str) -> bool:
        """True once the budget is spent (and then for every later stage); remembers where."""
        if self.seconds is None:
            return False
        if self.stopped is None and time.perf_counter() - self.start < self.seconds:
            return False
        self.stopped = self.stopped or stage
        return True


NONE = Deadline()          # the default: never over

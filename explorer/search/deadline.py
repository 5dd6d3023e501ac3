"""A wall-clock budget for the search (`--time-limit SECONDS`, `search.time_limit`).

The search's stages (NSGA-II generations of the binary and the ladder runs, rounds of path
relinking and of local search) ask `over(stage)` before each step; once the budget is spent
every later step is skipped and the search returns the front it has, so the outputs are
written as usual and the chosen plan is one the search really evaluated. A step already
running finishes (one generation's batch at most), so a run overshoots by at most one step.
Without a limit nothing changes: the same seed gives the same front.

A ladder search shares the budget between its stages (`share`): the binary run gets 40% of
it, the ladder run 75% of what is left, relinking and local search the rest, so a short
budget still yields a ladder front rather than a binary run cut short (a choice: no
split is prescribed).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Deadline:
    seconds: float | None = None               # None: no limit
    start: float = field(default_factory=time.perf_counter)
    stopped: str | None = None                 # the first stage a budget stopped (reported)
    parent: Deadline | None = None             # the budget this one is a share of
    spent: bool = False                        # this budget's own time is over

    def over(self, stage: str) -> bool:
        """True once this budget is spent (and then for every later stage); remembers the
        first stage it stopped, here and in the budgets it is a share of."""
        if self.seconds is None:
            return False
        if not self.spent and time.perf_counter() - self.start < self.seconds:
            return False
        self.spent = True
        budget: Deadline | None = self
        while budget is not None:
            budget.stopped = budget.stopped or stage
            budget = budget.parent
        return True

    def share(self, fraction: float) -> Deadline:
        """A budget of `fraction` of the time left here (no limit: this one)."""
        if self.seconds is None:
            return self
        left = self.seconds - (time.perf_counter() - self.start)
        return Deadline(max(0.0, left * fraction), parent=self)


NONE = Deadline()          # the default: never over

"""A wall-clock budget for the search (`--time-limit SECONDS`, `search.time_limit`).

The search's stages (NSGA-II generations of the binary and the ladder runs, rounds of path
relinking and of local search) ask `over(stage)` before each step, and a step's batch of
new chromosomes is evaluated in slices (`in_slices`) with the deadline asked between them;
once the budget is spent every later slice and step is skipped and the search returns the
front it has, so the outputs are written as usual and the chosen plan is one the search
really evaluated. A slice is sized to take about `SLICE_S` seconds at the pace of the
slices before it, and cut to what fits the time left, so a run ends within about one
derivation's time of its deadline whatever a derivation costs (a generation of a large
network takes tens of seconds on a loaded machine, one derivation several). Without a limit
nothing changes: the same seed gives the same front.

A ladder search shares the budget between its stages (`share`): the binary run gets 40% of
it (15% at the least fitted effort: explorer.search.effort.binary_share), the ladder run 75%
of what is left, the descent from the least memory 75% of what is left then, relinking
and local search the rest, so a short
budget still yields a ladder front rather than a binary run cut short (a choice: no
split is prescribed).

`clock` is the time source (seconds, monotonic); tests give one of their own.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence, TypeVar

SLICE_S = 1.0              # seconds a slice of a batch aims at
FIRST_SLICE = 2            # chromosomes in the search's first slice (no pace known yet)

K = TypeVar("K")
R = TypeVar("R")


@dataclass
class Deadline:
    seconds: float | None = None               # None: no limit
    start: float | None = None                 # clock reading it counts from (None: now)
    stopped: str | None = None                 # the first stage a budget stopped (reported)
    parent: Deadline | None = None             # the budget this one is a share of
    spent: bool = False                        # this budget's own time is over
    clock: Callable[[], float] = time.perf_counter
    pace: float | None = None                  # seconds per key of the last slice (the root's)

    def __post_init__(self) -> None:
        if self.start is None:
            self.start = self.clock()

    def left(self) -> float | None:
        """Seconds left (None: no limit; never below 0)."""
        if self.seconds is None:
            return None
        return max(0.0, self.seconds - (self.clock() - self.start))

    def over(self, stage: str) -> bool:
        """True once this budget is spent (and then for every later stage); remembers the
        first stage it stopped, here and in the budgets it is a share of."""
        if self.seconds is None:
            return False
        if not self.spent and self.clock() - self.start < self.seconds:
            return False
        self._stop(stage)
        return True

    def _stop(self, stage: str) -> None:
        self.spent = True
        budget: Deadline | None = self
        while budget is not None:
            budget.stopped = budget.stopped or stage
            budget = budget.parent

    def _root(self) -> Deadline:
        budget = self
        while budget.parent is not None:
            budget = budget.parent
        return budget

    def share(self, fraction: float) -> Deadline:
        """A budget of `fraction` of the time left here (no limit: this one)."""
        if self.seconds is None:
            return self
        return Deadline(self.left() * fraction, parent=self, clock=self.clock)

    def slices(self, keys: Sequence[K], stage: str, most: int = 64) -> Iterator[list[K]]:
        """`keys` in consecutive slices for the caller to evaluate; it stops yielding once
        the time is spent. Without a limit, slices of `most`. With one, a slice has as many
        keys as take SLICE_S seconds at the pace of the last slice (of any batch of the
        search: the pace is kept by the budget all shares come from), between 2 and `most`;
        FIRST_SLICE before any pace is known. Once a pace is known a slice is cut to the
        keys that fit the time left (1 at least). A batch's first slice always runs (the
        caller asked the deadline before the batch: a search's first batch so always has a
        front); before each later one the deadline is asked, and none is started when not
        even one key fits the time left. So the search ends within about one key's time of
        its deadline, however slow a derivation."""
        keys = list(keys)
        if self.seconds is None:
            for i in range(0, len(keys), most):
                yield keys[i:i + most]
            return
        root = self._root()
        done = 0
        while done < len(keys):
            if done and self.over(stage):
                return
            pace = root.pace
            if pace is None:
                size = min(FIRST_SLICE, most)
            else:
                size = max(2, min(most, int(SLICE_S / pace) if pace > 0 else most))
                left = self.left()
                if done and left < pace:             # not one key fits the time left
                    self._stop(stage)
                    return
                size = max(1, min(size, int(left / pace)))
            began = self.clock()
            part = keys[done:done + size]
            yield part
            done += len(part)
            root.pace = (self.clock() - began) / len(part)

    def in_slices(self, many: Callable[[list[K]], list[R]], keys: Sequence[K], stage: str,
                  most: int = 64) -> list[R]:
        """`many(keys)` in `slices`: the answers of the keys evaluated, in order (all of
        them unless the time ran out); without a limit one call."""
        if self.seconds is None:
            return list(many(list(keys))) if keys else []
        out: list[R] = []
        for part in self.slices(keys, stage, most):
            out += many(part)
        return out


NONE = Deadline()          # the default: never over

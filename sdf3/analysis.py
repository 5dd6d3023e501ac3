"""Errors of the dataflow analyses. They name the actor and channel at fault so that a caller
(the CSDF conversion, the CLI) can say which layer or edge of a model is wrong.

They are not `InputError`: a graph built by our own code that deadlocks is a bug, not bad
input. Callers that read a user's file wrap them.
"""
from __future__ import annotations


class AnalysisError(ValueError):
    """A graph property that makes an analysis impossible."""


class InconsistentGraph(AnalysisError):
    """No repetition vector exists: the rates of `channel` contradict the rest of the graph."""

    def __init__(self, message: str, channel: str):
        super().__init__(message)
        self.channel = channel


class Deadlock(AnalysisError):
    """The graph cannot complete an iteration: `actor` waits forever on `channel`."""

    def __init__(self, message: str, actor: str, channel: str, fired: dict[str, int] | None = None):
        super().__init__(message)
        self.actor = actor
        self.channel = channel
        self.fired = fired or {}

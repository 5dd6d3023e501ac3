"""Shared objects: Algorithm 1 of Minakova & Stefanov (greedy buffer reuse, explorer.memory.reuse).

Buffers carry no offset: each is its own region, laid one after another, so the arena is the
sum of the buffer sizes (the paper's Eq. 3). Kept so that the paper's tables reproduce.
"""
from __future__ import annotations

from explorer.memory.lifetimes import EdgeUse
from explorer.memory.buffers import Buffer
from explorer.memory.reuse import algorithm1


def place(uses: list[EdgeUse], pipelines: list[list[str]]) -> list[Buffer]:
    return algorithm1(uses, pipelines)


class SharedObjects:
    """Algorithm 1 over edge uses, shared objects laid one after another, under the paper's
    topological order and demand-driven schedules."""
    name = "shared-objects"
    per_tensor = False
    at_offsets = False
    reorders = False

    def place(self, uses: list[EdgeUse], pipelines: list[list[str]]) -> list[Buffer]:
        return place(uses, pipelines)

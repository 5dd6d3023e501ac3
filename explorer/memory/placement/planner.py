"""The interface every buffer planner implements: what it supports, asked by property, and
`place`, which turns edge uses into buffers.

The derivation (explorer.plan.derive), the schedule policies, the baselines, the runtime's
own bytes (explorer.throughput.runtime_costs) and the plan check ask these properties
instead of a planner's name, so a planner is added by one module and one registry entry
(explorer/memory/placement/__init__.py).

- `per_tensor`: True stores each tensor once (explorer/memory/tensors.py merges the edge
  uses of one producer into one use; shared rings, csdf/shared_rings.py), with the row
  lives of tensors stored by rows; False keeps the paper's model, one buffer per
  (producer, consumer) edge, each with its own ring and whole-interval lifetimes.
- `at_offsets`: True gives every use its own buffer at an offset in one arena (the arena is
  the largest offset + size); False returns shared objects without offsets, laid one after
  another (the paper's Eq. 3: the arena is the sum of the buffer sizes).
- `reorders`: True orders whole layers by least peak (Liberis & Lane,
  explorer/memory/reorder.py) and chooses each partition's phase schedule for the least
  arena (explorer/memory/policies.py); False runs the topological order and the
  demand-driven schedule, the paper's. The policies compare candidates on tensor uses, so
  a planner that reorders is per tensor.
"""
from __future__ import annotations

from typing import Protocol

from explorer.memory.buffers import Buffer
from explorer.memory.lifetimes import EdgeUse


class Planner(Protocol):
    """One buffer planner. `name` is the key app files, plan.json and `--placement` use."""
    name: str
    per_tensor: bool
    at_offsets: bool
    reorders: bool

    def place(self, uses: list[EdgeUse], pipelines: list[list[str]]) -> list[Buffer]:
        """Buffers holding `uses` (edge uses with sizes in elements and steps alive per
        partition) such that no two conflicting uses (explorer.memory.lifetimes.conflict,
        pipeline sets J respected) share bytes. Deterministic."""

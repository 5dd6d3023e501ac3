"""The memory model: buffers and Eq. 1-4, edge lifetimes over schedules (row staircases
included), Algorithm 1 (reuse), reordering, phase-schedule policies, plan validity,
buffer placement (placement/, one planner per module), and what a run keeps across
derivations (cache.RunCache).

May import: explorer.app, csdf, sdf3.
"""

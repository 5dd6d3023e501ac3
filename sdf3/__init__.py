"""Generic (C)SDF dataflow: graph model, SDF3 XML, analyses. Knows nothing of CNNs.

Modules: graph (model), xml (SDF3 XML via lxml), repetition (consistency, repetition
vector), schedule (single-processor schedule, minimal buffers, deadlock), throughput
(self-timed state space), tradeoff (storage/throughput points), notation (compact
schedules), tools (the real SDF3 binaries, when installed), analysis (errors).

May import: nothing of memtrade.
"""
from sdf3.analysis import AnalysisError, Deadlock, InconsistentGraph
from sdf3.graph import Actor, Channel, Graph
from sdf3.repetition import repetition_vector
from sdf3.schedule import Schedule, check_deadlock, min_buffer_schedule
from sdf3.throughput import throughput

__all__ = ["Actor", "Channel", "Graph", "AnalysisError", "Deadlock", "InconsistentGraph",
           "repetition_vector", "Schedule", "check_deadlock", "min_buffer_schedule", "throughput"]

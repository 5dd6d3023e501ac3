"""Throughput during the search: per-layer costs, device profiles (built-in and measured),
by-parts region context, the evaluator that turns phases into fps per CNN, and the
runtime's own bytes that a measured profile supplies (runtime_costs).

May import: explorer.app, explorer.memory, csdf, sdf3.
"""

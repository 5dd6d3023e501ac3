"""Throughput during the search: per-layer costs, device profiles (built-in and measured),
by-parts region context, and the evaluator that turns phases into fps per CNN.

May import: explorer.app, csdf, sdf3.
"""

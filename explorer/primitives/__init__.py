"""Primitive selection (TASO, Wen et al. 2020): per-layer conv primitive costs, the exact
ILP (HiGHS), a GA for comparison, and the study that reports their fronts.

May import: explorer.app, explorer.throughput, explorer.search, csdf, sdf3.
"""

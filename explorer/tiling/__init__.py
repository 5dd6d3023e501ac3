"""Fused tiling (MAFAT, Farley & Gerstlauer): tiled groups of layers, their genes and
derivation, and the searches over row parts, tiles, or both.

May import: explorer.app, explorer.memory, explorer.throughput, explorer.plan, explorer.search, csdf, sdf3.
"""

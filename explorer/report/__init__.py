"""What `explore` writes: output paths claimed safely, Pareto JSON, CSV and HTML, the
SDF3 XML of partitions, and the paper's baselines.

May import: explorer.app, explorer.memory, explorer.throughput, explorer.plan, explorer.search, explorer.tiling, explorer.primitives, csdf, sdf3.
"""

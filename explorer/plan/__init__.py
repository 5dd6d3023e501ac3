"""From a chromosome to a plan: the genes (whole, binary, ladder), the derivation of one
chromosome into buffers, schedules and memory (analysis -> memory -> placement), and the
Plan that `explore` writes and `deploy` reads.

May import: explorer.app, explorer.memory, explorer.throughput, csdf, sdf3.
"""

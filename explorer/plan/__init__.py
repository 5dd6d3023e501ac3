"""From a chromosome to a plan: the genes (whole, binary, ladder), the derivation of one
chromosome into buffers, schedules and memory (analysis -> memory -> placement), and the
Plan that `explore` writes and `deploy` reads (model: its frozen records; plan_file: plan.json
read back).

May import: explorer.app, explorer.memory, explorer.throughput, csdf, sdf3.
"""

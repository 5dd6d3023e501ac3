"""The application: what an app file says (CNNs, partitions, pipeline sets J, precision,
constraints, search settings), its loader and checks, units and layer names.

May import: csdf, sdf3.
"""

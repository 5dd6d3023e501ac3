"""Checks: a plan against its application (buffers, rows, lifetimes), a manifest against
its arena, and the reference run of the unmodified model.

May import: deploy.runtime, deploy.quant, deploy.ort, explorer.app, explorer.memory, explorer.plan, explorer.tiling, csdf, sdf3.
"""

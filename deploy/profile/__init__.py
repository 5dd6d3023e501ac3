"""`explore profile`: per-layer times whole and by parts (the ladder, in context), backend
workspace, and every conv primitive, measured on this machine.

May import: deploy.steps, deploy.quant, deploy.runtime, deploy.ort, deploy.build, explorer.app, explorer.plan, explorer.throughput, csdf, sdf3.
"""

"""`explore deploy`: a checked plan becomes a deployment directory (step models, manifest,
arena layout; TensorRT engines' sources and the board runner).

May import: deploy.steps, deploy.quant, deploy.runtime, deploy.backends, deploy.checks, explorer.plan, explorer.app, csdf, sdf3.
"""

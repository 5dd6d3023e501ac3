"""`explore run`: run a deployment, measure fps, bytes and footprint, and judge its outputs
against the unmodified model (the verdict).

May import: deploy.steps, deploy.quant, deploy.runtime, deploy.ort, deploy.backends, deploy.checks, sdf3.
"""

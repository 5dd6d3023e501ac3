"""`explore run`: run a deployment, measure fps, bytes and footprint, and judge its outputs
against a reference at the plan's precision (the verdict), and, at reduced precision, against
the fp32 model (vs_fp32).

May import: deploy.steps, deploy.quant, deploy.runtime, deploy.ort, deploy.backends, deploy.checks, sdf3.
"""

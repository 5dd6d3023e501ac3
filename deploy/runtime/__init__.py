"""What a deployment is at run time: the arena, the manifest, the executor that runs the
schedule over arena views, the process footprint, and measurement child processes.

May import: deploy.steps, deploy.quant, csdf, sdf3.
"""

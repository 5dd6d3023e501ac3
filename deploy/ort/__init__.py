"""ONNX Runtime, the CPU backend: sessions over arena views, NCHWc blocked layouts (rings
included), offline graph optimisation, and primitive forms.

May import: deploy.steps, deploy.quant, deploy.runtime, sdf3.
"""

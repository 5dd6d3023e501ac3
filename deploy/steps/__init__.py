"""ONNX step builders (onnx.helper): a layer whole or by parts, row-wise ops, opaque node
groups, fused tiles, conv primitives (primitives/), and the models a profile times.

May import: deploy.quant, csdf, sdf3.
"""

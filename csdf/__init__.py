"""The CNN side: graph model, ONNX import, model zoo, processing-by-parts rules, CNN->CSDF.

May import: sdf3.
"""
from csdf.model import CNN, EdgeId, Layer, Shape, edge_name

__all__ = ["CNN", "EdgeId", "Layer", "Shape", "edge_name"]

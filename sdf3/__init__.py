"""Generic (C)SDF dataflow: graph model, SDF3 XML, analyses. Knows nothing of CNNs."""
from sdf3.graph import Actor, Channel, Graph

__all__ = ["Actor", "Channel", "Graph"]

"""The backends by name: the one place a backend's name is looked up. `names()` gives the
`--backend` choices, `backend(name)` the object (one line naming the known backends for any
other name)."""
from __future__ import annotations

from deploy.backends.onnxruntime import OnnxRuntime
from deploy.backends.protocol import Backend
from deploy.backends.tensorrt import TensorRT
from sdf3.errors import InputError

BACKENDS: dict[str, Backend] = {b.name: b for b in (OnnxRuntime(), TensorRT())}
DEFAULT = "onnxruntime"


def names() -> list[str]:
    """The backends' names, in registry order (argparse choices)."""
    return list(BACKENDS)


def backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise InputError(f"backend {name!r}: expected one of {', '.join(BACKENDS)}")
    return BACKENDS[name]

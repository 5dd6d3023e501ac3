"""A step session bound to arena views: ONNX Runtime reads and writes the arrays in place
(I/O binding), and each call goes straight to the C++ session.

Why the C++ call: the Python wrapper's run_with_iobinding adds ~45 us of Python per call
(graph-capture bookkeeping) against ~3 us for the call itself, measured on a Relu model; a
by-parts frame makes thousands of calls.

    >>> import numpy as np
    >>> bound_shape(np.zeros(24, np.uint8), [1, 2, 3, 4])     # declared 4-D, viewed flat
    [1, 2, 3, 4]
    >>> bound_shape(np.zeros((2, 3), np.uint8), ["n", 3])     # symbolic: the view's own
    [2, 3]
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnxruntime as ort


def bound_shape(arr: np.ndarray, dims: list | None) -> list[int]:
    """The shape to bind a contiguous view with: the one the model declares for that port
    when it is static and holds as many elements (a row-blocked ring port is declared 5-D,
    deploy/ort/blocked_rings.py), else the view's own."""
    if dims and all(isinstance(d, int) for d in dims) and int(np.prod(dims)) == arr.size \
            and list(dims) != list(arr.shape):
        return [int(d) for d in dims]
    return list(arr.shape)


def bind_views(session: ort.InferenceSession, inputs: dict[str, np.ndarray],
               outputs: dict[str, np.ndarray]) -> ort.IOBinding:
    """`session`'s binding to exactly these arrays, each in the shape its port declares."""
    binding = session.io_binding()
    declared = {v.name: v.shape for v in session.get_inputs() + session.get_outputs()}
    for name, arr in inputs.items():
        binding.bind_input(name, "cpu", 0, arr.dtype, bound_shape(arr, declared.get(name)),
                           arr.ctypes.data)
    for name, arr in outputs.items():
        binding.bind_output(name, "cpu", 0, arr.dtype, bound_shape(arr, declared.get(name)),
                            arr.ctypes.data)
    return binding


def runner(session: ort.InferenceSession, binding: ort.IOBinding,
           options: ort.RunOptions) -> Callable[[], None]:
    """A call running `session` on `binding` with `options`, through the C++ session."""
    inner = getattr(session, "_sess", None)
    if inner is not None and hasattr(inner, "run_with_iobinding") and hasattr(binding, "_iobinding"):
        run, handle = inner.run_with_iobinding, binding._iobinding
    else:   # pragma: no cover - other onnxruntime versions
        run, handle = session.run_with_iobinding, binding

    def call() -> None:
        run(handle, options)
    return call

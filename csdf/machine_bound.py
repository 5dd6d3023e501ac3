"""The size bound of an imported CNN: a model whose graph input, any one edge or all its
parameters take more bytes than this machine has memory cannot be profiled, deployed or
checked here (each of those holds such a tensor whole, in float32, the unmodified model's
type), and its shapes are almost always a typing error (`input_shape: [1, 3, 4000000,
4000000]`). It is refused in one line naming the tensor and its bytes before anything of
that size is allocated: the graph input as soon as its shape is fixed (before ONNX shape
inference), the edges and parameters once the layers are read (before the search).

The machine's memory is its physical memory (`os.sysconf`: SC_PHYS_PAGES x SC_PAGE_SIZE),
or the control group's limit (cgroup v2 `memory.max`) when that is lower; where neither can
be read, nothing is refused.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

from sdf3.errors import InputError

ELEMENT_BYTES = 4              # float32: the reference model's and the import's element type
CGROUP_LIMIT = Path("/sys/fs/cgroup/memory.max")
INT64_MAX = 2**63 - 1          # an ONNX dimension is an int64


def total_memory() -> int | None:
    """Bytes of memory this process may use at most: physical memory, or a lower cgroup limit."""
    found = []
    try:
        found.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        pass
    try:
        limit = CGROUP_LIMIT.read_text().strip()
        if limit.isdigit():
            found.append(int(limit))
    except OSError:
        pass
    found = [b for b in found if b > 0]
    return min(found) if found else None


def _gb(nbytes: int) -> str:
    return f"{nbytes / 2**30:.3g} GB" if nbytes >= 2**30 else f"{nbytes / 2**20:.3g} MB"


def check_bytes(what: str, elements: int, where: str, limit: int | None = None) -> None:
    """Refuse `what` (a tensor or the parameters, in words) of `elements` float32 elements
    when they take more than the machine's memory (`limit`, default `total_memory()`)."""
    limit = total_memory() if limit is None else limit
    nbytes = elements * ELEMENT_BYTES
    if limit is not None and nbytes > limit:
        raise InputError(f"{where}: {what} holds {nbytes} B as float32 ({_gb(nbytes)}), more "
                         f"than this machine's {limit} B of memory ({_gb(limit)})")


def check_dims(name: str, shape: list[int], where: str) -> None:
    """A graph input's fixed shape: each dimension an int64, the tensor within memory."""
    big = [d for d in shape if d > INT64_MAX]
    if big:
        raise InputError(f"{where}: graph input '{name}' dimension {big[0]} is beyond an ONNX "
                         f"dimension's range (at most {INT64_MAX})")
    check_bytes(f"graph input '{name}' {list(shape)}", math.prod(shape), where)


def check_cnn(cnn, where: str) -> None:
    """Every edge of `cnn` (csdf.model.CNN) and its parameters within memory."""
    limit = total_memory()
    if limit is None:
        return
    edges = cnn.edges()
    if edges:
        src, dst = max(edges, key=lambda e: cnn.edge_elements(*e))
        check_bytes(f"edge {src} -> {dst} {list(cnn.edge_shape(src, dst))}",
                    cnn.edge_elements(src, dst), where, limit)
    check_bytes("the parameters", cnn.param_count, where, limit)

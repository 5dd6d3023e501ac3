"""Offsets of the plan's buffers in one arena.

A plan placed by an offset planner (explorer.memory.placement) carries every buffer's offset:
`place_at` keeps them on the host (the arena is the plan's buffer bytes) and, for a device,
stretches them to aligned offsets without ever bringing two regions closer. Otherwise
(shared objects, Algorithm 1) `place` lays buffers one after another. Algorithm 1 already gives every buffer a region of its own size shared by the edges it
stores (edges whose lifetimes never overlap, and never edges of partitions that run in
parallel), so placing the buffers one after another is exact: the host arena is the plan's
buffer bytes to the byte. Device arenas align every offset to 256 bytes (CUDA's texture and
cuDNN alignment) and so may be a little larger.
"""
from __future__ import annotations

from dataclasses import dataclass

from sdf3.errors import InputError

HOST_ALIGN = 1
DEVICE_ALIGN = 256


@dataclass(frozen=True)
class Placement:
    offsets: list[int]      # per buffer index
    sizes: list[int]        # bytes per buffer
    total: int              # arena bytes

    def region(self, buffer: int) -> tuple[int, int]:
        return self.offsets[buffer], self.sizes[buffer]


def place(sizes: list[int], align: int = HOST_ALIGN) -> Placement:
    """Buffers one after another, each offset rounded up to `align`."""
    offsets, end = [], 0
    for size in sizes:
        start = -(-end // align) * align
        offsets.append(start)
        end = start + int(size)
    total = -(-end // align) * align if sizes else 0
    return Placement(offsets, [int(s) for s in sizes], total)


def disjoint(placement: Placement, a: int, b: int) -> bool:
    """True when buffers a and b do not overlap in the arena."""
    (oa, sa), (ob, sb) = placement.region(a), placement.region(b)
    return oa + sa <= ob or ob + sb <= oa


def place_at(offsets: list[int], sizes: list[int], align: int = HOST_ALIGN) -> Placement:
    """The plan's own offsets, each rounded up to `align`: distinct offsets are visited in
    increasing order and each keeps at least its distance from the previous one, so regions
    that were disjoint stay disjoint (an offset moves up by less than `align` times the
    number of distinct offsets below it)."""
    moved: dict[int, int] = {}
    prev_in = prev_out = 0
    for o in sorted(set(int(v) for v in offsets)):
        prev_out = -(-(prev_out + o - prev_in) // align) * align
        prev_in = o
        moved[o] = prev_out
    new = [moved[int(o)] for o in offsets]
    end = max((o + int(s) for o, s in zip(new, sizes)), default=0)
    return Placement(new, [int(s) for s in sizes], -(-end // align) * align if sizes else 0)


def machine_bytes() -> int | None:
    """Memory of this machine (None where the OS does not say), as the import's size bound
    counts it (csdf/machine_bound.py: physical memory, or a lower cgroup limit)."""
    from csdf.machine_bound import total_memory
    return total_memory()


def check_fits(nbytes: int, where: str, what: str = "the arena") -> None:
    """Refuse, before anything is allocated, memory this machine does not have: a declared
    shape far too large would otherwise make the run allocate (or page) hundreds of GiB."""
    total = machine_bytes()
    if total is not None and nbytes > total:
        raise InputError(f"{where}: {what} needs {nbytes / 2**30:.1f} GiB ({nbytes} B), more than "
                         f"this machine's {total / 2**30:.1f} GiB of memory")

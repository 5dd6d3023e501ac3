"""The process's real memory around a deployment: what it held before anything of the
deployment was loaded (the baseline), after loading, and at its peaks while loading and
running, read from the kernel (Linux /proc/self/status VmRSS and VmHWM).

The baseline is taken after the backend's one-time initialisation, which does not depend on
the model (ONNX Runtime: 8.0 MiB for its environment and kernel registry, reported apart as
runtime_init_bytes; a plain session pays it alike). The peak is reset to the current RSS (writing 5 to /proc/self/clear_refs) when the
baseline is taken and again after loading, so import-time peaks do not count and the load
peak and the run peak are seen apart. The footprint is peak - baseline; its breakdown
names what can be counted (weights as the backend holds them, the arena, the executor's
index vectors and output arrays) and what can only be measured as a difference (ONNX
Runtime's workspace while running: running peak - RSS after loading; session and graph
state: the rest of what loading kept; and how far the load peak rose above the run's).
"""
from __future__ import annotations

import ctypes
import resource
import sys
from dataclasses import asdict, dataclass, field

MiB = 2 ** 20


def _status(key: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def rss_bytes() -> int:
    """This process's resident set now."""
    value = _status("VmRSS:")
    if value is None:    # not Linux: the peak is the best figure there is
        return peak_rss_bytes()
    return value


def peak_rss_bytes() -> int:
    """This process's peak resident set since exec or the last `reset_peak`. Linux: VmHWM,
    which starts afresh at exec, unlike getrusage's ru_maxrss that keeps the parent's peak
    across fork+exec (a benchmark that measures in child processes would otherwise report
    its own peak for every child)."""
    value = _status("VmHWM:")
    if value is not None:
        return value
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                               "usmblks", "fsmblks", "uordblks", "fordblks",
                                               "keepcost")]


class HeapMeter:
    """glibc's mallinfo2, looked up once by whoever measures heaps (a backend counting its
    sessions' and bindings' heap, a workspace probe): `in_use` is None without glibc >= 2.33."""

    def __init__(self):
        try:
            self._fn = ctypes.CDLL("libc.so.6").mallinfo2
            self._fn.restype = _Mallinfo2
        except (OSError, AttributeError):
            self._fn = None

    def in_use(self) -> int | None:
        """Bytes malloc has handed out and not taken back (the heap's blocks in use plus
        mmapped ones). Exact where RSS moves in pages and heap top-pads: a small step's
        session state is tens of KiB (the workspace probe, deploy/profile/workspace_probe.py;
        the ladder's bytes per call, deploy/profile/ladder.py)."""
        if self._fn is None:
            return None
        info = self._fn()
        return int(info.uordblks + info.hblkhd)


def heap_in_use() -> int | None:
    """HeapMeter().in_use() for a single reading."""
    return HeapMeter().in_use()


def trim_heap() -> None:
    """Give the heap's free pages back to the kernel (glibc's malloc_trim) before the
    baseline: blocks a caller freed stay resident otherwise, and a deployment loading into
    them would not show in RSS. No-op off glibc."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def reset_peak() -> bool:
    """Set the peak back to the current RSS (Linux >= 4.0); False where it cannot be."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


@dataclass
class Footprint:
    """Bytes measured at the stages of one deployment's life in this process."""
    baseline_rss_bytes: int = 0      # after imports, before the deployment is loaded
    loaded_rss_bytes: int = 0        # after every session is built and bound
    load_peak_rss_bytes: int = 0     # highest RSS while loading
    run_peak_rss_bytes: int = 0      # highest RSS while running frames
    peak_reset: bool = False         # False: peaks include what came before the baseline
    runtime_init_bytes: int = 0      # the backend's one-time init, just before the baseline
    counted: dict[str, int] = field(default_factory=dict)   # bytes the deployment holds, by part

    def start(self, init=None) -> None:
        """Take the baseline; `init` (the backend's one-time initialisation, independent of
        any model) runs first and its RSS is reported as runtime_init_bytes."""
        if init is not None:
            before = rss_bytes()
            init()
            self.runtime_init_bytes = rss_bytes() - before
        trim_heap()
        self.peak_reset = reset_peak()
        self.baseline_rss_bytes = rss_bytes()

    def loaded(self) -> None:
        self.load_peak_rss_bytes = peak_rss_bytes()
        self.loaded_rss_bytes = rss_bytes()
        reset_peak()

    def ran(self) -> None:
        self.run_peak_rss_bytes = peak_rss_bytes()

    @property
    def peak_rss_bytes(self) -> int:
        return max(self.load_peak_rss_bytes, self.run_peak_rss_bytes)

    @property
    def footprint_bytes(self) -> int:
        return self.peak_rss_bytes - self.baseline_rss_bytes

    def breakdown(self) -> dict[str, int]:
        """footprint = counted parts + workspace + sessions_other + load_excess."""
        load = self.loaded_rss_bytes - self.baseline_rss_bytes
        return {**self.counted,
                "workspace_bytes": max(0, self.run_peak_rss_bytes - self.loaded_rss_bytes),
                "sessions_other_bytes": load - sum(self.counted.values()),
                "load_excess_bytes": max(0, self.load_peak_rss_bytes
                                         - max(self.run_peak_rss_bytes, self.loaded_rss_bytes))}

    def report(self) -> dict:
        out = {k: v for k, v in asdict(self).items() if k != "counted"}
        out.update(peak_rss_bytes=self.peak_rss_bytes, footprint_bytes=self.footprint_bytes,
                   breakdown=self.breakdown())
        return out

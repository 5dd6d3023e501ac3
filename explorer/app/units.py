"""Memory figures with units, as the paper writes them.

The paper's "MB" is 2^20 bytes (our MobileNetV2 figures match its tables only so), so here
B, KB, MB, GB are powers of 2^10, and KiB, MiB, GiB mean the same. The SI spellings kB and
kiB-like lower-case forms are refused rather than guessed: "kB" could mean 1000 or 1024.
Plain numbers are bytes. Units are case-sensitive apart from that rule.
"""
from __future__ import annotations

import re

from sdf3.errors import InputError

UNITS = {"B": 1, "KB": 2**10, "MB": 2**20, "GB": 2**30, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
MAX_BYTES = 2**60            # 1 EB (2^60 B): a bound no device's memory reaches
MAX_EXPONENT = 30           # decimal exponents beyond this are typing errors, not figures
_FIGURE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?\s*([A-Za-z]*)\s*$")


def parse_memory(text: str | int | float, where: str = "memory") -> int:
    """Bytes in a memory figure such as "8MB", "0.02 MB", "512KiB", "20000" or 20000.
    Fractions round to the nearest byte. Raises InputError naming `where` otherwise, also
    for figures that are not finite (.inf, .nan, 1e400MB) or beyond MAX_BYTES."""
    if isinstance(text, bool):
        raise InputError(f"{where}: expected a memory figure such as 8MB, got {text!r}")
    if isinstance(text, (int, float)):
        return _bytes(float(text) if isinstance(text, float) else text, text, where)
    match = _FIGURE.match(str(text))
    if not match:
        if str(text).strip().startswith("-"):
            raise InputError(f"{where}: memory must not be negative, got {text!r}")
        raise InputError(f"{where}: expected a memory figure such as 8MB, 512KB or 20000, got {text!r}")
    number, exponent, unit = match.groups()
    if unit not in UNITS and unit != "":
        raise InputError(f"{where}: unknown memory unit {unit!r} in {text!r}; expected one of "
                         f"{', '.join(UNITS)} (KB, MB, GB are powers of 1024; kB is not accepted)")
    # an exponent is checked before any arithmetic: 10 ** 999999999 would run for hours
    if exponent and (len(exponent) > 4 or abs(int(exponent)) > MAX_EXPONENT):
        raise InputError(f"{where}: exponent out of range in {text!r} (at most "
                         f"e{MAX_EXPONENT} either way)")
    value = float(number) * (10.0 ** int(exponent) if exponent else 1.0)
    return _bytes(value * UNITS.get(unit, 1), text, where)


def _bytes(value: int | float, text, where: str) -> int:
    """A byte count from a number already in bytes: finite, >= 0, <= MAX_BYTES."""
    if value != value or value in (float("inf"), float("-inf")):
        raise InputError(f"{where}: expected a finite memory figure, got {text!r}")
    if value < 0:
        raise InputError(f"{where}: memory must not be negative, got {text!r}")
    if value > MAX_BYTES:
        raise InputError(f"{where}: {text!r} is more than 2^60 bytes, larger than any "
                         "device's memory")
    return round(value)


def format_bytes(n: int | float) -> str:
    """A short human figure in the same units: 8388608 -> "8.00 MB", 512 -> "512 B"."""
    n = float(n)
    for unit in ("GB", "MB", "KB"):
        if abs(n) >= UNITS[unit]:
            return f"{n / UNITS[unit]:.2f} {unit}"
    return f"{int(n)} B"

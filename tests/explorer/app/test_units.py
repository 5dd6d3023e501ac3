"""Memory units: the paper's MB is 2^20 bytes; SI "kB" is refused, not guessed."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.app.units import format_bytes, parse_memory
from sdf3.errors import InputError


@pytest.mark.parametrize("text, expected", [
    ("8MB", 8 * 1024 * 1024), ("8 MB", 8388608), ("8MiB", 8388608), ("512KB", 524288),
    ("512KiB", 524288), ("1GB", 1073741824), ("2GiB", 2147483648), ("100B", 100),
    ("20000", 20000), (20000, 20000), ("0.02MB", 20972), ("1.5KB", 1536), ("0", 0),
    ("1e3", 1000), (" 3 MB ", 3145728),
])
def test_parse_memory(text, expected):
    assert parse_memory(text) == expected


@pytest.mark.parametrize("text", ["8kB", "8mb", "8 TB", "MB", "eight MB", "8 M B", "", "1..2MB"])
def test_parse_memory_refuses(text):
    with pytest.raises(InputError, match="apps/x.yaml: memory"):
        parse_memory(text, where="apps/x.yaml: memory")


@pytest.mark.parametrize("text", ["-8MB", -1, "-0.5KB"])
def test_negative_memory_refused(text):
    with pytest.raises(InputError, match="negative"):
        parse_memory(text)


@pytest.mark.parametrize("n, text", [(512, "512 B"), (1024, "1.00 KB"), (8388608, "8.00 MB"),
                                     (int(58.63 * 2**20), "58.63 MB"), (3 * 2**30, "3.00 GB")])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


@given(st.integers(min_value=0, max_value=2**40))
def test_format_then_parse_is_close(n):
    """format_bytes rounds to 2 decimals of its unit: parsing it back is within 0.5%."""
    back = parse_memory(format_bytes(n).replace(" ", ""))
    assert abs(back - n) <= max(1, 0.005 * n)

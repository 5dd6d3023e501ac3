"""tests/data holds copies of ../shared's files so a clone runs every test alone: each copy
must be the file its README names, byte for byte (its sha256 there), and equal to its source
wherever the shared folder is present."""
from __future__ import annotations

import hashlib
import re

from conftest import DATA, SHARED

ROW = re.compile(r"^\| (\S+) \| shared/(\S+) .*\| ([0-9a-f]{64}) \|$")


def _rows() -> list[tuple[str, str, str]]:
    text = (DATA / "README.md").read_text()
    return [m.groups() for m in map(ROW.match, text.splitlines()) if m]


def test_readme_names_every_data_file_once():
    named = [copy for copy, _, _ in _rows()]
    on_disk = sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*")
                     if p.is_file() and p.name != "README.md")
    assert sorted(named) == on_disk and len(set(named)) == len(named) and named


def test_copies_have_the_hashes_the_readme_gives():
    for copy, _, digest in _rows():
        assert hashlib.sha256((DATA / copy).read_bytes()).hexdigest() == digest, copy


def test_copies_equal_their_sources_where_the_shared_folder_is_present():
    """Without ../shared (a bare clone, CI) the hash check above is the whole check."""
    for copy, source, _ in _rows():
        origin = SHARED / source
        if origin.is_file():
            assert origin.read_bytes() == (DATA / copy).read_bytes(), f"{copy} != {origin}"

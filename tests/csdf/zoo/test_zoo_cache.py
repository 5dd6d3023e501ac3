"""The zoo cache heals itself: entries carry a SHA-256 digest beside them, and a
truncated, damaged, digest-less or swapped entry is rebuilt instead of used."""
from __future__ import annotations

import hashlib

import onnx
import pytest

from conftest import write_tiny_onnx
from csdf import zoo
from csdf.zoo import cache as zcache

NAME = "mobilenet_v1_025"


@pytest.fixture
def builds(tmp_path, monkeypatch):
    """zoo.build replaced by a small deterministic model per seed; counts the builds."""
    made = []

    def build(name, seed=0):
        made.append((name, seed))
        return onnx.load(str(write_tiny_onnx(tmp_path / f"b{seed}.onnx", seed=seed)))
    monkeypatch.setattr(zoo, "build", build)
    zcache._verified.clear()
    return made


def _expected(tmp_path, seed=0) -> bytes:
    return onnx.load(str(write_tiny_onnx(tmp_path / f"e{seed}.onnx", seed=seed))).SerializeToString()


def test_entry_has_its_digest_and_is_reused(tmp_path, builds):
    path = zoo.model_path(NAME, tmp_path / "zoo")
    digest = zcache.digest_path(path).read_text().split()[0]
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert path.read_bytes() == _expected(tmp_path)
    zcache._verified.clear()                       # a new process: verified from the files
    assert zoo.model_path(NAME, tmp_path / "zoo") == path and len(builds) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, path.name + ".sha256"]


def _truncate(path, tmp_path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _damage(path, tmp_path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _swap(path, tmp_path):              # a different valid model saved under the name
    other = _expected(tmp_path, seed=7)
    onnx.load_from_string(other)
    path.write_bytes(other)


def _no_digest(path, tmp_path):
    zcache.digest_path(path).unlink()


def _bad_digest_file(path, tmp_path):
    zcache.digest_path(path).write_bytes(b"\xff\xfe")


@pytest.mark.parametrize("spoil", [_truncate, _damage, _swap, _no_digest, _bad_digest_file],
                         ids=lambda f: f.__name__.strip("_"))
def test_entry_that_does_not_verify_is_rebuilt(tmp_path, builds, capsys, spoil):
    path = zoo.model_path(NAME, tmp_path / "zoo")
    spoil(path, tmp_path)
    zcache._verified.clear()
    assert zoo.model_path(NAME, tmp_path / "zoo") == path
    assert len(builds) == 2 and path.read_bytes() == _expected(tmp_path)
    assert zcache.verifies(path)
    err = capsys.readouterr().err
    assert "does not match its digest; rebuilding" in err and err.count("\n") == 1
    assert not [p for p in path.parent.iterdir() if p.suffix == ".tmp"]


def test_change_after_verification_in_one_process_is_seen(tmp_path, builds):
    path = zoo.model_path(NAME, tmp_path / "zoo")
    _swap(path, tmp_path)                  # new bytes, new size/mtime: hashed again
    zoo.model_path(NAME, tmp_path / "zoo")
    assert len(builds) == 2 and path.read_bytes() == _expected(tmp_path)

"""Cache states (csdf/cache_env.py, explorer/throughput/profile_cache.py, csdf/zoo): for
each state of the measured-profile cache's entry and lock (absent, a file, a folder in its
place) the measurement is made at most once per run that needs it, never lost, stored
where it can be and read back next time; $MEMTRADE_CACHE naming something that is not a
folder is one line; a zoo cache entry that is a folder is one line."""
from __future__ import annotations

import os

import pytest

from csdf import zoo
from csdf.cache_env import env_cache
from explorer.throughput.profile_cache import ProfileCache, cache_dir
from sdf3.errors import InputError
from test_profile_cache import profile

STATES = ["absent", "file", "folder"]


@pytest.fixture
def app(tmp_path):
    from conftest import write_tiny_onnx
    from explorer.app.appfile import load_app
    write_tiny_onnx(tmp_path / "tiny.onnx")
    (tmp_path / "app.yaml").write_text("name: c\nplatform: cpu\ncnns:\n  - {name: tiny, model: tiny.onnx}\n")
    return load_app(tmp_path / "app.yaml")


@pytest.mark.parametrize("entry", STATES)
@pytest.mark.parametrize("lock", STATES)
def test_each_state_of_entry_and_lock(tmp_path, app, monkeypatch, capsys, entry, lock):
    from memtrade import platform
    from deploy.profile import app_profile
    measured = []

    def measure(app_, settings, say, meta):
        measured.append(1)
        return profile(1.0 + len(measured))
    monkeypatch.setattr(app_profile, "measure_app", measure)
    cache = ProfileCache(tmp_path / "cache")
    cache.folder.mkdir()
    from explorer.throughput.profile_cache import machine_key, profile_key
    key = profile_key(app.cnns, app.precision.name, app.threads, "blocked", "regions",
                      machine_key(), app_profile.code_digest())
    for path, state in ((cache.path(key), entry), (cache.folder / f"{key.digest}.lock", lock)):
        if state == "folder":
            path.mkdir()
        elif state == "file" and path.suffix == ".lock":
            path.write_text("")
    if entry == "file":      # a stored entry: the one measured by an earlier run
        cache.put(key, profile(9.0))
    first = platform.cpu_profile(app, cache, say=lambda line: None)
    second = platform.cpu_profile(app, cache, say=lambda line: None)
    err = capsys.readouterr().err
    stored = entry != "folder"
    # measured only when nothing usable is stored, and once more when it could not be stored
    assert len(measured) == (0 if entry == "file" else 1 if stored else 2)
    want = 9.0 if entry == "file" else 2.0
    assert first.models["tiny"]["conv1"].whole_ms == want
    assert second.models["tiny"]["conv1"].whole_ms == (want if stored else 3.0)
    assert ("cannot store the measured profile" in err) == (entry == "folder")
    assert ("cannot lock the cache entry" in err) == (lock == "folder" and entry != "file")
    assert "Traceback" not in err


@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_memtrade_cache_that_is_not_a_folder_is_one_line(tmp_path, monkeypatch, kind):
    path = tmp_path / "cache"
    path.write_text("") if kind == "file" else os.mkfifo(path)
    monkeypatch.setenv("MEMTRADE_CACHE", str(path))
    for use in (env_cache, cache_dir, zoo.default_cache_dir):
        with pytest.raises(InputError, match=f"MEMTRADE_CACHE={path}: expected a folder"):
            use()


def test_memtrade_cache_a_folder_or_unset(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMTRADE_CACHE", str(tmp_path / "new"))
    assert cache_dir() == tmp_path / "new" and zoo.default_cache_dir() == tmp_path / "new" / "zoo"
    monkeypatch.delenv("MEMTRADE_CACHE")
    assert env_cache() is None


def test_a_zoo_entry_that_is_a_folder_is_one_line(tmp_path):
    name = zoo.ALL_NAMES[0]
    (tmp_path / f"{name}-v{zoo.VERSION}-s{zoo.DEFAULT_SEED}.onnx").mkdir()
    with pytest.raises(InputError, match=f"zoo:{name}: the cache entry .* is not a file"):
        zoo.model_path(name, tmp_path)

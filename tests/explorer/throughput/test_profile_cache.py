"""The measured-profile cache of `platform: cpu`: keys follow the model's bytes and the
settings, entries round-trip, two writers at once leave a whole entry, a corrupt entry is
reported once and read as missing, and the lock keeps a second holder waiting."""
from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from conftest import write_tiny_onnx
from csdf.onnx_import import load_onnx
from explorer.throughput.device_profile import DeviceProfile, LayerTimes
from explorer.throughput.profile_cache import ProfileCache, model_digest, profile_key


def profile(ms: float) -> DeviceProfile:
    return DeviceProfile(name="here", precision="fp32", meta={"threads": 1},
                         models={"tiny": {"conv1": LayerTimes(ms, ms / 8, 8),
                                          "fc": LayerTimes(2 * ms, by_phases={2: 3 * ms})}})


def tiny(tmp_path: Path, seed: int = 0):
    return {"tiny": load_onnx(write_tiny_onnx(tmp_path / f"tiny{seed}.onnx", seed), "tiny")}


def test_key_follows_model_bytes_and_settings(tmp_path):
    a, b = tiny(tmp_path, 0), tiny(tmp_path, 1)        # same layers, other weights
    assert model_digest(a["tiny"]) != model_digest(b["tiny"])
    base = profile_key(a, "fp32", 1, machine="m")
    assert profile_key(tiny(tmp_path, 0), "fp32", 1, machine="m").digest == base.digest
    others = [profile_key(b, "fp32", 1, machine="m"), profile_key(a, "fp16", 1, machine="m"),
              profile_key(a, "fp32", 2, machine="m"), profile_key(a, "fp32", 1, machine="n"),
              profile_key(a, "fp32", 1, "nchw", machine="m"),
              profile_key(a, "fp32", 1, machine="m", code="other code")]
    assert len({k.digest for k in others} | {base.digest}) == 7


def test_hit_and_miss_round_trip(tmp_path):
    cache = ProfileCache(tmp_path / "cache")
    key = profile_key(tiny(tmp_path), "fp32", 1, machine="m")
    other = profile_key(tiny(tmp_path, 1), "fp32", 1, machine="m")
    assert cache.get(key) is None
    cache.put(key, profile(1.25))
    got = cache.get(key)
    assert got.models["tiny"]["conv1"].whole_ms == 1.25
    assert got.models["tiny"]["conv1"].part_ms == 1.25 / 8
    assert got.models["tiny"]["fc"].by_phases == {2: 3.75}
    assert cache.get(other) is None                      # changed model bytes: a miss
    assert [p.name for p in cache.folder.iterdir() if p.suffix == ".json"] == [cache.path(key).name]


def _writer(folder: str, key, ms: float, times: int) -> None:
    cache = ProfileCache(folder)
    for _ in range(times):
        cache.put(key, profile(ms))


def test_two_writers_leave_a_whole_entry(tmp_path):
    key = profile_key(tiny(tmp_path), "fp32", 1, machine="m")
    folder = str(tmp_path / "cache")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(folder, key, ms, 40)) for ms in (1.0, 7.0)]
    for p in procs:
        p.start()
    seen = set()
    while any(p.is_alive() for p in procs):          # a reader meanwhile sees whole files
        got = ProfileCache(folder).get(key, on_corrupt=lambda line: seen.add("corrupt"))
        if got is not None:
            seen.add(got.models["tiny"]["conv1"].whole_ms)
    for p in procs:
        p.join()
        assert p.exitcode == 0
    final = ProfileCache(folder).get(key)
    assert final.models["tiny"]["conv1"].whole_ms in (1.0, 7.0)
    assert "corrupt" not in seen
    leftovers = [p.name for p in Path(folder).iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_corrupt_entry_reads_as_missing_with_one_line(tmp_path):
    cache = ProfileCache(tmp_path / "cache")
    key = profile_key(tiny(tmp_path), "fp32", 1, machine="m")
    cache.put(key, profile(1.0))
    cache.path(key).write_text('{"format": "memtrade-profile", "version": 1, "na')
    lines = []
    assert cache.get(key, lines.append) is None
    assert len(lines) == 1 and str(cache.path(key)) in lines[0] and "measuring again" in lines[0]
    cache.put(key, profile(2.0))                   # measured again: the entry is whole again
    assert cache.get(key, lines.append).models["tiny"]["conv1"].whole_ms == 2.0
    assert len(lines) == 1


def _hold(folder: str, key, seconds: float, started) -> None:
    with ProfileCache(folder).lock(key):
        started.set()
        time.sleep(seconds)


def test_lock_makes_a_second_holder_wait(tmp_path):
    key = profile_key(tiny(tmp_path), "fp32", 1, machine="m")
    folder = str(tmp_path / "cache")
    ctx = multiprocessing.get_context("fork")
    started = ctx.Event()
    holder = ctx.Process(target=_hold, args=(folder, key, 1.5, started))
    holder.start()
    assert started.wait(30)
    waits = []
    begin = time.monotonic()
    with ProfileCache(folder).lock(key, waits.append, every_s=0.3):
        held_after = time.monotonic() - begin
    holder.join()
    assert held_after >= 1.0 and waits and waits == sorted(waits)

"""explorer.throughput.layer_times keeps a layer's times and, in `bytes`, the runtime's bytes
(explorer.throughput.runtime_costs.LayerBytes); a profile file keeps both under one level of
keys. An entry with every key goes through the file and back unchanged, each key landing in
its group."""
from __future__ import annotations

from dataclasses import fields

import pytest

from explorer.throughput.device_profile import DeviceProfile, load_profile, save_profile
from explorer.throughput.layer_times import LayerTimes, from_flat, to_flat
from explorer.throughput.runtime_costs import LayerBytes

ENTRY = {"whole_ms": 1.5, "part_ms": 0.25, "phases": 8, "by_phases": {2: 1.75, 8: 2.5},
         "region": {2: 100.0, 8: 300.0}, "alone": {2: 1.6, 8: 2.2}, "beside_ms": 1.7,
         "whole_ws_bytes": 11, "part_ws_bytes": 12, "whole_session_bytes": 13,
         "part_session_bytes": 14, "band_session_bytes": {2: 15, 8: 16},
         "band_ws_bytes": {2: 17, 8: 18}, "alone_session_bytes": {2: 19},
         "alone_ws_bytes": {2: 20}, "beside_session_bytes": {"in": 21, "both": 22},
         "beside_ws_bytes": 23, "call_bytes": 24}


def test_every_key_lands_in_its_group():
    t = from_flat(**ENTRY)
    times = {f.name for f in fields(LayerTimes)} - {"bytes"}
    byte_keys = {f.name for f in fields(LayerBytes)}
    assert times | byte_keys == set(ENTRY) and not times & byte_keys
    for key, value in ENTRY.items():
        assert getattr(t.bytes if key in byte_keys else t, key) == value, key
    assert to_flat(t) == ENTRY
    with pytest.raises(AttributeError):
        t.call_bytes = 1                      # a byte figure is not a time


def test_a_profile_file_round_trips_both_groups(tmp_path):
    t = from_flat(**ENTRY)
    for name in ("p.json", "p.yaml"):
        path = save_profile(DeviceProfile("p", models={"m": {"a": t}}), tmp_path / name)
        back = load_profile(path).models["m"]["a"]
        assert back == t and to_flat(back) == ENTRY


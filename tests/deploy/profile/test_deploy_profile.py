"""`explore profile`: measured per-layer times (whole and one phase) in the device-profile
format the search's evaluator reads."""
from __future__ import annotations

import json

import numpy as np
import pytest

from csdf.model import INPUT
from csdf.parts import can_split, phases_for_rows
from deploy.profile import workspace_probe
from deploy.profile.ladder_records import StepTimes
from explorer.app.appfile import load_app
from explorer.cli.main import main
from explorer.throughput.device_profile import load_profile
from explorer.throughput.evaluator import make_evaluator
from deploy_fixtures import tiny_app_file, tiny_onnx


@pytest.fixture(scope="module")
def app_file(tmp_path_factory):
    """The tiny app on an 8 x 12 input: ladder rows 1, 2 and 4 (11 ladder deployments; 16 x 12
    adds row 8 and 4 more deployments, of the same kinds: at the top rung only the tallest
    layers go by parts, one group alone)."""
    folder = tmp_path_factory.mktemp("app")
    path = tiny_app_file(folder)
    tiny_onnx(folder / "tiny.onnx", shape=(1, 3, 8, 12))
    return path


@pytest.fixture(scope="module")
def measured(app_file, tmp_path_factory):
    """The module's one real `explore profile` of the tiny app (8 x 12: ladder rows 1, 2,
    4, 11 deployments), one call per firing, one thread, two frames: the ladder's
    figures (test_profile_measures_the_ladder_in_run_layout) and the evaluator's reading of
    the file (test_profile_file_feeds_the_evaluator) are asserted on the same measurement.
    Each test reads its own copy."""
    out = tmp_path_factory.mktemp("measured") / "prof.yaml"
    assert main(["profile", str(app_file), "--out", str(out), "--repeats", "1",
                 "--frames", "2", "--threads", "1", "--steps", "layers"]) == 0
    return out


@pytest.fixture
def profile_file(measured, tmp_path):
    """A copy of the module's measured profile in this test's folder."""
    out = tmp_path / "prof.yaml"
    out.write_bytes(measured.read_bytes())
    return out


@pytest.fixture(scope="module")
def small_app_file(tmp_path_factory):
    """The tiny app on a 4 x 4 input: ladder rows 1 and 2, 7 ladder deployments where
    8 x 12 has 11 (the rounds test times none of them)."""
    folder = tmp_path_factory.mktemp("small")
    path = tiny_app_file(folder)
    tiny_onnx(folder / "tiny.onnx", shape=(1, 3, 4, 4))
    return path


def test_profile_file_feeds_the_evaluator(app_file, profile_file, tmp_path):
    out = profile_file
    profile = load_profile(out)
    app = load_app(app_file)
    cnn = app.cnns["tiny"]
    table = profile.models["tiny"]
    assert set(table) == set(cnn.order())
    assert len({cnn.layer(n).output_shape[2] for n in cnn.order() if can_split(cnn.layer(n))}) >= 2
    for name in cnn.order():
        layer = cnn.layer(name)
        assert table[name].whole_ms > 0
        splits = can_split(layer) and layer.output_shape[2] > 1
        assert (table[name].phases == layer.output_shape[2]) if splits else table[name].phases is None
    evaluator = make_evaluator(app, str(out))
    whole = evaluator.fps()["tiny"]
    # the evaluator's frame time with every layer whole is the sum of the measured times,
    # times the executor loop's share the ladder runs measured (median of frame / layers)
    ratios = sorted(r["frame_ms"] / r["layers_ms"] for r in profile.meta["ladder_runs"]["tiny"])
    loop = ratios[len(ratios) // 2] if len(ratios) % 2 else sum(ratios[len(ratios) // 2 - 1:][:2]) / 2
    assert whole == pytest.approx(1000.0 / (loop * sum(t.whole_ms for t in table.values())), rel=1e-9)
    # and `explore APP --evaluator FILE` searches with it: reuse alone fits 1 GB, so the
    # plan is every layer whole and its predicted fps is the measured sum's
    runs = tmp_path / "run"
    assert main([str(app_file), "--evaluator", str(out), "--mem", "1GB", "--out", str(runs),
                 "--quiet"]) == 0
    plan = json.loads((runs / "plan.json").read_text())
    assert plan["fps"]["tiny"] == pytest.approx(whole, rel=1e-6)
    # the workspace profile measured enters the plan's memory: every layer whole, one
    # partition, so it is the largest whole-layer workspace, on top of params + buffers
    ws = max(t.bytes.whole_ws_bytes or 0 for t in table.values())
    assert plan["workspace_bytes"] == ws
    # and the state of every step model's session: one whole model per layer,
    # with each layer's one call's binding (the frame copy has neither)
    sessions = sum((t.bytes.whole_session_bytes or 0) + (t.bytes.call_bytes or 0) for n, t in table.items()
                   if cnn.layer(n).op != INPUT)
    assert plan["session_bytes"] == sessions
    if workspace_probe.available():
        assert all(t.bytes.whole_session_bytes > 0 for n, t in table.items() if cnn.layer(n).op != INPUT)
        assert len({t.bytes.call_bytes for t in table.values()}) == 1 and table[cnn.order()[0]].bytes.call_bytes > 0
    # and the CNN's output array the executor hands over (one copy: a sequential CNN), with
    # the runtime measured (session state: where the probe runs)
    outputs = 4 * sum(int(np.prod(cnn.layer(n).output_shape)) for n in cnn.order()
                      if cnn.graph.out_degree(n) == 0) if workspace_probe.available() else 0
    assert plan["output_bytes"] == outputs
    assert plan["memory_bytes"] == plan["param_bytes"] + plan["buffer_bytes"] + ws + sessions + outputs
    # the profile written is not overwritten unless asked
    before = out.read_bytes()
    assert main(["profile", str(app_file), "--out", str(out), "--repeats", "1"]) == 2
    assert out.read_bytes() == before


def test_profile_tensorrt_is_measured_on_the_board(app_file, tmp_path, capsys):
    assert main(["profile", str(app_file), "--backend", "tensorrt", "--out", str(tmp_path / "p.yaml")]) == 2
    assert "board_runner.py" in capsys.readouterr().err


def test_profile_measures_conv_workspace():
    """A 3x3 conv on a 64-channel 56x56 map: in ONNX Runtime's NCHWc form the step reorders
    its input and its output into scratch (two tensors of 64*56*56 floats); in plain NCHW,
    MLAS expands the input segment by segment into one small per-thread buffer (16K floats),
    far below one tensor. The probe (deploy/profile/workspace_probe.py, Linux only) reads both,
    to its resolution of about 128 KiB."""
    import sys
    import numpy as np
    from csdf.model import Layer
    from deploy.ort.backend import OrtBackend
    from deploy.steps.parts import InPort, OutPort, step_model
    from deploy.profile.layers import step_workspace
    import onnx
    if not sys.platform.startswith("linux"):
        pytest.skip("the peak RSS can be reset only on Linux")
    rng = np.random.default_rng(0)
    layer = Layer("c", "Conv", {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1],
                                "dilations": [1, 1], "group": 1},
                  {"W": rng.standard_normal((64, 64, 3, 3)).astype(np.float32)}, ["x"], (1, 64, 56, 56))
    model = step_model(layer, [InPort("in0", (1, 64, 56, 56), "nchw", 56)],
                       [OutPort("out0", (1, 64, 56, 56), "nchw")], "float32")
    import tempfile
    from pathlib import Path
    tensor = 64 * 56 * 56 * 4
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.onnx"
        onnx.save(model, str(path))
        feeds = {"in0": rng.standard_normal((1, 64, 56, 56)).astype(np.float32)}
        fetches = {"out0": np.zeros((1, 64, 56, 56), np.float32)}
        blocked = step_workspace(path, OrtBackend("float32", 1, layout="nchwc"), "nchwc", feeds, fetches)
        plain = step_workspace(path, OrtBackend("float32", 1, layout="nchw"), "nchw", feeds, fetches)
    assert tensor <= blocked <= 3 * tensor
    assert plain < tensor // 4


def test_profile_measures_the_ladder_in_run_layout(app_file, profile_file):
    """Every layer by parts at Φ = ceil(H / k) for k = 1, 2, 4 (H up to 8), measured in
    deployments; the evaluator's frame time at k = 2 everywhere is the measured sum."""
    out = profile_file
    profile = load_profile(out)
    assert profile.meta["layout"] == "blocked" and profile.meta["threads"] == 1
    assert profile.meta["steps"] == "layers"   # one call per firing (regions: test_region_steps.py)
    assert profile.meta["rounds"] == 1         # rounds: test_profile_flags_reach_the_measurement
    assert profile.meta["ladder_rows"]["tiny"] == [1, 2, 4]
    app = load_app(app_file)
    cnn = app.cnns["tiny"]
    table = profile.models["tiny"]
    for name in cnn.order():
        h = cnn.layer(name).output_shape[2]
        want = {-(-h // k) for k in (1, 2, 4) if k < h} if can_split(cnn.layer(name)) else set()
        assert set(table[name].by_phases) == want, name
        assert set(table[name].alone) == want == set(table[name].region), name
    # one record per deployment: whole first, then every k (each followed by its runs of
    # layers alone); its calls are the plan's firings (one per phase of every layer) and
    # the whole run's layers are whole_ms
    everything = profile.meta["ladder_runs"]["tiny"]
    runs = [r for r in everything if "alone" not in r]
    assert [r["rows"] for r in runs] == [0, 1, 2, 4]
    for r in runs:
        ph = ({n: 1 for n in cnn.order()} if r["rows"] == 0 else
              phases_for_rows(cnn, {n: r["rows"] for n in cnn.order()}))
        assert r["calls"] == sum(ph.values())
        assert r["frame_ms"] > 0
    assert runs[0]["layers_ms"] == pytest.approx(sum(t.whole_ms for t in table.values()), abs=1e-3)
    ph = phases_for_rows(cnn, {n: 2 for n in cnn.order()})
    got = make_evaluator(app, str(out)).fps({"tiny": ph})["tiny"]
    # a layer at a measured Φ costs the most measured at Φ or fewer phases (never faster
    # with more phases: two frames of a tiny model do dip)
    # (a whole layer with a neighbour in parts: its time beside parts)
    near = {a if ph[b] > 1 else b for a, b in cnn.edges() if (ph[a] > 1) != (ph[b] > 1)}
    total = sum(table[n].beside_ms if n in near else
                max([table[n].whole_ms] + [ms for p, ms in table[n].by_phases.items() if p <= ph[n]])
                for n in cnn.order())
    # charged the loop between calls: the median over runs of frame / layers' sum
    ratios = sorted(r["frame_ms"] / r["layers_ms"] for r in everything)
    assert got == pytest.approx(1000.0 / (total * ratios[len(ratios) // 2]), rel=1e-9)


def test_profile_flags_reach_the_measurement(app_file, tmp_path, monkeypatch):
    """`explore profile`'s flags are the measurement's settings (ladder rounds in
    test_ladder_rounds_keep_each_layers_least)."""
    import deploy.profile.app_profile as app_profile
    from explorer.throughput.device_profile import DeviceProfile
    seen = []

    def fake(app, settings, progress=None, meta=None):
        seen.append(settings)
        return DeviceProfile(name="fake", meta=dict(meta or {}), models={"tiny": {}})
    monkeypatch.setattr(app_profile, "measure_app", fake)
    assert main(["profile", str(app_file), "--out", str(tmp_path / "p.yaml"), "--repeats", "3",
                 "--frames", "4", "--threads", "2", "--rounds", "5", "--steps", "layers",
                 "--layout", "nchw", "--primitives"]) == 0
    assert seen == [app_profile.Settings(threads=2, repeats=3, layout="nchw", steps="layers",
                                         frames=4, rounds=5, primitives=True)]


def test_by_phases_interpolates():
    from explorer.throughput.device_profile import LayerTimes

    t = LayerTimes(1.0, by_phases={4: 2.0, 16: 5.0})
    assert t.ms(1) == 1.0 and t.ms(4) == 2.0 and t.ms(16) == 5.0
    assert t.ms(2) == pytest.approx(1.0 + 1.0 / 3)          # between Φ 1 and 4
    assert t.ms(8) == pytest.approx(2.0 + 3.0 * 4 / 12)     # between 4 and 16
    assert t.ms(20) == pytest.approx(5.0 + 3.0 * 4 / 12)    # the last segment extended


def test_by_phases_never_faster_with_more_phases():
    """A measured dip (Φ 4 below Φ 2, Φ 2 below whole) is raised to the largest time at
    fewer phases before interpolating: more phases never run faster."""
    from explorer.throughput.device_profile import LayerTimes

    t = LayerTimes(1.0, by_phases={2: 0.9, 4: 1.6, 8: 1.5, 16: 2.4})
    assert t.ms(2) == 1.0 and t.ms(4) == 1.6 and t.ms(8) == 1.6 and t.ms(16) == 2.4
    assert t.ms(3) == pytest.approx(1.3)                    # between (2, 1.0) and (4, 1.6)
    assert t.ms(12) == pytest.approx(1.6 + 0.8 * 4 / 8)     # between (8, 1.6) and (16, 2.4)
    times = [t.ms(p) for p in range(1, 40)]
    assert times == sorted(times)


def test_band_bytes_lie_between_alone_and_the_ladder_by_region():
    """A layer by parts in a region of other layers counts session state and workspace
    between what it held alone (region = its own parameters) and in the ladder's region at
    the nearest measured Φ, linear in the region's parameters, clamped; without a region
    (or alone) the measured figures themselves."""
    from explorer.throughput.layer_times import from_flat

    t = from_flat(1.0, by_phases={4: 1.0, 8: 1.0}, region={4: 1010.0, 8: 2010.0},
                  alone={4: 1.0, 8: 1.0}, band_session_bytes={4: 100, 8: 50},
                  band_ws_bytes={4: 10, 8: 10}, alone_session_bytes={4: 300, 8: 500},
                  alone_ws_bytes={4: 30, 8: 20})
    assert t.band_bytes(4) == (100, 10) and t.band_bytes(4, alone=True) == (300, 30)
    assert t.band_bytes(4, region=510.0, own=10.0) == (200, 20)        # half way
    assert t.band_bytes(8, region=1010.0, own=10.0) == (275, 15)       # region 1010 of 2010
    assert t.band_bytes(5, region=10.0, own=10.0) == (300, 30)         # alone's, at Φ 4
    assert t.band_bytes(4, region=5000.0, own=10.0) == (100, 10)       # clamped to the ladder's


def test_a_whole_layer_beside_parts_counts_its_side(tmp_path):
    """A whole layer beside parts counts what it held reading a rows ring ("in"), writing
    one ("out") or both, as the profile filed it per side (the largest measured for a side
    it never had; a plain number, as older profiles filed it, for every side); the file
    keeps the sides and refuses others with one line."""
    from explorer.throughput.device_profile import DeviceProfile, load_profile, save_profile
    from explorer.throughput.layer_times import from_flat
    from sdf3.errors import InputError

    t = from_flat(1.0, beside_session_bytes={"in": 100, "both": 300},
                  beside_ws_bytes={"in": 10, "both": 90})
    assert t.band_bytes(1, side="in") == (100, 10)
    assert t.band_bytes(1, side="both") == (300, 90)
    assert t.band_bytes(1, side="out") == (300, 90)
    assert from_flat(1.0, beside_session_bytes=7, beside_ws_bytes=3).band_bytes(1, side="in") == (7, 3)
    path = save_profile(DeviceProfile(name="p", models={"m": {"a": t}}), tmp_path / "p.yaml")
    back = load_profile(path).models["m"]["a"]
    assert back.bytes.beside_ws_bytes == {"in": 10, "both": 90}
    path.write_text(path.read_text().replace("both:", "up:"))
    with pytest.raises(InputError, match="sides must be in, out or both"):
        load_profile(path)


def test_region_step_profiles_keep_the_measured_points():
    """A profile that timed region steps (meta steps: regions) prices a layer at its
    measured points as they are: its share of a band's call moves with the band, not with
    its own phases, alone and in a region."""
    from explorer.throughput.device_profile import LayerTimes

    t = LayerTimes(1.0, by_phases={2: 0.9, 4: 1.6, 8: 1.5, 16: 2.4},
                   region={2: 10.0, 4: 10.0, 8: 10.0, 16: 10.0}, alone={2: 2.0, 4: 2.0, 8: 2.0, 16: 2.0})
    assert t.ms(2, monotone=False) == 0.9 and t.ms(8, monotone=False) == 1.5
    assert t.ms(3, monotone=False) == pytest.approx(1.25)
    assert t.ms(12, monotone=False) == pytest.approx(1.5 + 0.9 * 4 / 8)
    # in a region of all the ladder's parameters: the ladder's point, not the running maximum
    assert t.ms_in(8, 10.0, 1.0, monotone=False) == 1.5 and t.ms_in(8, 10.0, 1.0) == 1.6


def test_ladder_rounds_keep_each_layers_least(small_app_file, monkeypatch):
    """With rounds, every deployment is timed once per round, rounds after each other, and
    each layer keeps its least time (contention only adds time); the runs' records too."""
    from deploy.profile import ladder as ladder_profile

    cnn = load_app(small_app_file).cnns["tiny"]
    calls = []
    noise = [3.0, 1.0, 2.0]          # round 2 is the quiet one

    def fake(folder, name, frames, threads, layout, keep=None, whole=False):
        calls.append(folder.name)
        r = calls.count("run0") - 1
        return StepTimes({n: noise[r] * (1 + i) for i, n in enumerate(cnn.order())},
                                        10 * noise[r], 1)

    runs = 1 + sum(1 + len(ladder_profile.alone_groups(
        cnn, phases_for_rows(cnn, dict.fromkeys(cnn.order(), k)))) for k in ladder_profile.ladder_rows(cnn))
    monkeypatch.setattr(ladder_profile, "step_times_in_child", fake)
    records: list = []
    table = ladder_profile.profile_ladder(cnn, frames=1, runs_out=records, rounds=3)
    # round after round: every deployment once before any twice
    assert runs >= 5 and calls == [f"run{i}" for i in range(runs)] * 3
    for i, n in enumerate(cnn.order()):
        assert table[n].whole_ms == 1.0 * (1 + i)
    assert [r["frame_ms"] for r in records] == [10.0] * runs

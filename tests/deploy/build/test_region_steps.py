"""Region steps: consecutive firings by parts run as one ONNX Runtime call
per band (deploy/build/regions.py, deploy/steps/regions.py), compared with ONNX Runtime on
the original model: a region with a residual join, a stride-2 depthwise conv, padding rows
at both borders, a ceil-mode pool, and parts (bands) that do not divide the height (25
and 13 rows in parts of 2 and 3)."""
from __future__ import annotations

import pytest

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts, can_split
from deploy.build.derive import derive as deploy
from deploy.run.measure import measure
from deploy.run.verdict import RTOL
from onnx_cases import region_block
from deploy_fixtures import fired, make_plan, planned

NAME = "rb"


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return load_onnx(str(region_block(tmp_path_factory.mktemp("rb") / "rb.onnx")), name=NAME)


def parts_of(cnn, k: int) -> dict[str, int]:
    """Every layer that can by parts in parts of k rows (the last part shorter)."""
    if k == 1:
        return all_parts(cnn)
    return {n: -(-int(cnn.layer(n).output_shape[2]) // k)
            if can_split(cnn.layer(n)) and int(cnn.layer(n).output_shape[2]) > 1 else 1
            for n in cnn.order()}


def band_bytes(manifest, step, parity: int) -> tuple[set[int], set[int]]:
    """Arena rows (byte offsets) a region step gathers and writes, from its bindings."""
    edges = manifest.edges
    consts = {b.name: b.values for b in step.bind if b.kind == "const"}
    read, written = set(), set()
    for b in step.bind:
        if b.kind != "edge":
            continue
        e = edges[b.edges[parity]]
        if b.name.startswith("out"):
            rows = range(b.slot, b.slot + b.shape[0])
            target = written
        else:
            rows = consts.get(f"{b.name}_idx", range(e.slots))
            target = read
        for r in rows:
            at = e.offset + r * e.row_bytes
            if at in written and target is written:
                raise AssertionError(f"{step.model}: arena row at {at} written twice")
            target.add(at)
    return read, written


def deployed(cnn, tmp_path, k: int, every_band: bool = True, **kw):
    """Every band a region step (here the test net's bands are few and mostly unique: the
    default runs a band no other shares as its firings, test_every_band_model_serves...)."""
    plan = make_plan([cnn], {NAME: parts_of(cnn, k)}, **kw)
    manifest = deploy(plan, {NAME: cnn}, tmp_path / "dep", regions=True, every_band=every_band)
    return plan, manifest


@pytest.mark.parametrize("layout", ["nchw", "blocked"])
@pytest.mark.parametrize("k", [1, 2, 3], ids=["rows", "parts-of-2", "parts-of-3"])
def test_region_steps_compute_what_onnx_runtime_computes(cnn, tmp_path, k, layout):
    plan, manifest = deployed(cnn, tmp_path, k)
    result = measure(tmp_path / "dep", frames=2, layout=layout, threads=1)
    assert result["max_abs_diff"][NAME] < 1e-4
    assert result["arena_bytes"] == plan["buffer_bytes"]
    # every firing of the plan exactly once, in the plan's order; fewer calls than firings
    assert fired(manifest) == planned(plan)
    steps = [s for p in manifest.partitions for s in p.steps]
    firings = sum(len(f) for f in planned(plan).values())
    assert result["calls_per_frame"][NAME] == len(steps) < firings
    bands = [s for s in steps if s.region]
    assert bands and all(len(s.region) >= 2 for s in bands)
    # a band never writes an arena row it gathers from before the band (one call may
    # write before it reads), and never writes a row twice
    for s in bands:
        for parity in (0, 1):
            read, written = band_bytes(manifest, s, parity)
            assert not read & written, s.model


def test_one_band_holds_the_stride_2_conv_and_the_residual_join(cnn, tmp_path):
    _, manifest = deployed(cnn, tmp_path, 1)
    stride2 = next(n for n in cnn.order() if (cnn.layer(n).hyper.get("strides") or [1])[0] == 2)
    join = next(n for n in cnn.order() if cnn.layer(n).op == "Add")
    layers = [{layer for layer, _ in s.region or []}
              for p in manifest.partitions for s in p.steps]
    assert any({stride2, join} <= band for band in layers)
    # the bands of the steady state share one model: fewer models than region steps
    regions = [s.model for p in manifest.partitions for s in p.steps if s.region]
    assert len(set(regions)) < len(regions)


@pytest.mark.parametrize("k", [1, 2, 3], ids=["rows", "parts-of-2", "parts-of-3"])
def test_every_band_model_serves_two_bands_or_more(cnn, tmp_path, k):
    """A band whose model no other band would share runs as its firings' own steps
    (deploy/build/regions.shared): every region model is bound by two steps or more, and the
    plan's firings are all there, each once (the outputs: checked against ONNX Runtime above)."""
    from collections import Counter
    plan, manifest = deployed(cnn, tmp_path, k, every_band=False)
    steps = [s for p in manifest.partitions for s in p.steps]
    uses = Counter(s.model for s in steps if s.region)
    assert not uses or min(uses.values()) >= 2
    computed = Counter(tuple(f) for s in steps for f in (s.region or [(s.layer, s.phase)]))
    want = Counter((n, p) for n, count in plan["phases"][NAME].items() for p in range(max(1, count)))
    assert computed == want
    # with every band a region step some band has a model of its own (start-up, drain)
    alone = deploy(plan, {NAME: cnn}, tmp_path / "alone", regions=True, every_band=True)
    once = Counter(s.model for p in alone.partitions for s in p.steps if s.region)
    assert min(once.values()) == 1 and len(once) > len(uses)
    assert len(steps) > sum(len(p.steps) for p in alone.partitions)


def test_adjacent_firings_of_one_layer_run_as_one_conv(cnn, tmp_path):
    """The stem conv fires twice for each row of the stride-2 conv after it: in a band the
    two firings are one Conv over both rows (deploy/build/regions.merge), and the step still
    lists both plan firings (the outputs are checked against ONNX Runtime above)."""
    import onnx
    _, manifest = deployed(cnn, tmp_path, 1)
    convs = {n for n in cnn.order() if cnn.layer(n).op == "Conv"}
    merged = 0
    for s in (s for p in manifest.partitions for s in p.steps if s.region):
        firings = sum(1 for layer, _ in s.region if layer in convs)
        model = onnx.load(str(tmp_path / "dep" / s.model), load_external_data=False)
        nodes = sum(1 for n in model.graph.node if n.op_type == "Conv")
        assert nodes <= firings
        merged += firings - nodes
    assert merged > 0


def test_weights_are_held_once_across_region_models(cnn, tmp_path):
    """The plan's parameters, once: a layer's weights in several band models and its part
    model are one array in the backend (deploy/ort/backend.py _shared_weights)."""
    plan, manifest = deployed(cnn, tmp_path, 1)
    holders = {}
    for info in manifest.models.values():
        for layer in info.layers or [info.layer]:
            holders[layer] = holders.get(layer, 0) + 1
    assert max(holders.values()) > 1          # some layer's weights are in several models
    result = measure(tmp_path / "dep", frames=1, layout="nchw", threads=1)
    assert result["param_bytes"] == plan["param_bytes"]


@pytest.mark.parametrize("k", [1, 3], ids=["rows", "parts-of-3"])
def test_region_steps_in_a_pipeline(cnn, tmp_path, k):
    plan, manifest = deployed(cnn, tmp_path, k, split={NAME: 3}, pipelined=True)
    result = measure(tmp_path / "dep", frames=3, threads=1)
    assert result["max_abs_diff"][NAME] < 1e-4
    assert result["arena_bytes"] == plan["buffer_bytes"]
    assert fired(manifest) == planned(plan)


def test_region_steps_in_fp16(cnn, tmp_path):
    plan, manifest = deployed(cnn, tmp_path, 1, data_bytes=2)
    assert any(s.region for p in manifest.partitions for s in p.steps)
    result = measure(tmp_path / "dep", frames=2, threads=1)
    assert result["max_abs_diff"][NAME] <= RTOL["float16"] * result["max_abs_output"][NAME]
    assert result["arena_bytes"] == plan["buffer_bytes"]


def test_a_profile_shares_a_band_time_among_its_layers_by_their_work(cnn, tmp_path):
    """explore profile times deployments as they run (deploy/profile/ladder.py): a region
    step's one measured time goes to its layers by each firing's work (the step's `work`:
    weights x output pixels + outputs), and every layer of the band gets a share."""
    from deploy.profile.ladder import step_times_in_child, time_shares
    _, manifest = deployed(cnn, tmp_path, 1)
    band = next(s for p in manifest.partitions for s in p.steps if s.region)
    shares = time_shares(band)
    work: dict[str, int] = {}
    for (layer, _), w in zip(band.region, band.work):
        n, c, _h, width = cnn.layer(layer).output_shape
        assert w == (cnn.layer(layer).param_count + c) * n * width   # one row per firing
        work[layer] = work.get(layer, 0) + w
    assert shares == pytest.approx({k: v / sum(work.values()) for k, v in work.items()})
    timed = step_times_in_child(tmp_path / "dep", NAME, 2, 1, "nchw")
    assert timed.calls == sum(len(p.steps) for p in manifest.partitions)
    assert set(timed.layers) == set(cnn.order())
    assert all(ms > 0 for ms in timed.layers.values())
    # each call's ONNX Runtime binding keeps 1-6 KiB for the run, by its ports (a session's
    # state: tens of KiB)
    assert 1024 <= timed.call_bytes <= 8192

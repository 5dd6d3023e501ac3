"""By-parts regions (csdf/regions.py) and the two measured contexts of a layer's
time by parts: the ladder's region and the layer alone (LayerTimes.ms_in, the evaluator,
deploy/profile/ladder.py's alone groups)."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from csdf.parts import phases_for_rows
from deploy.profile import ladder as ladder_profile
from deploy.profile.ladder_records import StepTimes
from explorer.app.appfile import load_app
from explorer.throughput.device_profile import DeviceProfile, LayerTimes, load_profile, profile_from_dict, save_profile
from csdf.regions import beside_parts, region_params, region_sizes
from explorer.throughput.evaluator import make_evaluator
from sdf3.errors import InputError
from deploy_fixtures import tiny_app_file, tiny_onnx


@pytest.fixture(scope="module")
def app_file(tmp_path_factory):
    return tiny_app_file(tmp_path_factory.mktemp("app"))


@pytest.fixture(scope="module")
def small_app_file(tmp_path_factory):
    """The tiny app on a 4 x 4 input: ladder rows 1 and 2, 9 deployments where 16 x 12
    has 15, with the same branches (residual, squeeze-excite, concat) among the split layers."""
    folder = tmp_path_factory.mktemp("small")
    path = tiny_app_file(folder)
    tiny_onnx(folder / "tiny.onnx", shape=(1, 3, 4, 4))
    return path


def _components(edges, phases, params) -> dict[str, int]:
    """The same regions by networkx's connected components (independent of UnionFind)."""
    g = nx.Graph()
    split = [n for n, p in phases.items() if p > 1]
    g.add_nodes_from(split)
    g.add_edges_from((a, b) for a, b in edges if a in g and b in g)
    return {n: sum(params[m] for m in comp) for comp in nx.connected_components(g) for n in comp}


def test_regions_are_split_layers_joined_by_split_edges():
    # a -> b -> c -> d -> e, b -> d; c whole: {a, b} and {d, e} would be apart but b -> d joins
    edges = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("b", "d")]
    params = {"a": 1, "b": 10, "c": 100, "d": 1000, "e": 10000}
    got = region_params("abcde", edges, {"a": 2, "b": 2, "c": 1, "d": 3, "e": 3}, params)
    assert got == {n: 11011 for n in "abde"}
    # without b -> d two regions; a layer outside `layers` (another stage) separates too
    got = region_params("abcde", edges[:4], {"a": 2, "b": 2, "d": 3, "e": 3}, params)
    assert got == {"a": 11, "b": 11, "d": 11000, "e": 11000}
    assert region_params("abde", edges, {n: 2 for n in "abcde"}, params) == {
        n: 11011 for n in "abde"}


def test_region_sizes_are_the_layers_of_each_region():
    edges = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("b", "d")]
    for phases in ({"a": 2, "b": 2, "c": 1, "d": 3, "e": 3}, {"a": 2, "b": 2, "d": 3, "e": 3},
                   {"b": 2, "d": 2}, {"e": 4}):
        ones = dict.fromkeys("abcde", 1)
        for edge_set in (edges, edges[:4]):
            assert region_sizes("abcde", edge_set, phases) == _components(edge_set, {
                n: phases.get(n, 1) for n in "abcde"}, ones)


def test_whole_layers_beside_parts():
    edges = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("b", "d")]
    assert beside_parts("abcde", edges, {"b": 2}) == {"a", "c", "d"}
    assert beside_parts("abcde", edges, {"b": 2, "d": 4}) == {"a", "c", "e"}
    assert beside_parts("acde", edges, {"b": 2, "d": 4}) == {"c", "e"}   # b in another stage
    assert beside_parts("abcde", edges, {}) == set()


def test_time_between_alone_and_the_ladder_by_region():
    """Linear in the region's parameters between alone (region = own) and the ladder's
    region at Φ; clamped outside; Φ between measured counts interpolated in all three."""
    t = LayerTimes(1.0, by_phases={4: 3.0, 8: 5.0}, region={4: 1000, 8: 3000},
                   alone={4: 2.0, 8: 2.5})
    assert t.ms_in(4, 100, 100) == 2.0                  # alone
    assert t.ms_in(4, 1000, 100) == 3.0                 # the ladder's region
    assert t.ms_in(4, 5000, 100) == 3.0                 # larger: clamped to the ladder
    assert t.ms_in(4, 550, 100) == pytest.approx(2.5)   # half way
    # Φ 6: ladder 4.0, alone 2.25, ladder region 2000 -> a region of 1050 is half way
    assert t.ms_in(6, 1050, 100) == pytest.approx(2.25 + 0.5 * 1.75)
    assert t.ms_in(1, 1050, 100) == 1.0                 # whole: no region
    plain = LayerTimes(1.0, by_phases={4: 3.0})         # no alone times: the ladder's
    assert plain.ms_in(4, 100, 100) == 3.0


def test_profile_keeps_region_and_alone(tmp_path):
    t = LayerTimes(1.0, by_phases={2: 1.5, 4: 2.0}, region={2: 10.0, 4: 20.0},
                   alone={2: 1.2, 4: 1.4}, beside_ms=1.1)
    path = save_profile(DeviceProfile("p", models={"m": {"l": t}}), tmp_path / "p.yaml")
    assert load_profile(path).models["m"]["l"] == t
    data = {"models": {"m": {"l": {"whole_ms": 1.0, "by_phases": {2: 1.5, 4: 2.0},
                                   "region": {2: 10}, "alone": {2: 1.2, 4: 1.4}}}}}
    with pytest.raises(InputError, match=r"models.m.l.region needs the phase counts"):
        profile_from_dict(data, "p.yaml")
    data["models"]["m"]["l"]["region"] = {1: 10, 2: 20}
    with pytest.raises(InputError, match=r"models.m.l.region: key 1 must be a phase count"):
        profile_from_dict(data, "p.yaml")
    data["models"]["m"]["l"] = {"whole_ms": 1.0, "beside_ms": "slow"}
    with pytest.raises(InputError, match=r"key 'models.m.l.beside_ms' must be a number"):
        profile_from_dict(data, "p.yaml")


def test_evaluator_places_each_layer_by_its_region(app_file, tmp_path):
    """A profile with both contexts: the evaluator's frame equals the sum, computed here
    with networkx's components, of each layer between alone and the ladder."""
    app = load_app(app_file)
    cnn = app.cnns["tiny"]
    params = {n: cnn.layer(n).param_count for n in cnn.order()}
    every = phases_for_rows(cnn, dict.fromkeys(cnn.order(), 1))
    ladder_region = _components(cnn.edges(), every, params)
    table = {}
    for i, n in enumerate(cnn.order()):
        p = every[n]
        table[n] = (LayerTimes(1.0 + i, by_phases={p: 3.0 + i}, region={p: ladder_region[n]},
                               alone={p: 2.0 + i}, beside_ms=1.5 + i) if p > 1 else
                    LayerTimes(1.0 + i, beside_ms=1.25 + i))
    prof = save_profile(DeviceProfile("ctx", models={"tiny": table}), tmp_path / "ctx.yaml")
    ev = make_evaluator(app, str(prof))
    split = [n for n in cnn.order() if every[n] > 1]
    phases = {n: (every[n] if n in split[::2] or n == split[1] else 1) for n in cnn.order()}
    region = _components(cnn.edges(), phases, params)
    want = 0.0
    near = {n for n in cnn.order() if phases[n] == 1 and any(
        phases[m] > 1 for m in nx.all_neighbors(cnn.graph, n))}
    assert near
    for i, n in enumerate(cnn.order()):
        if phases[n] == 1:
            want += (1.25 + i if every[n] == 1 else 1.5 + i) if n in near else 1.0 + i
            continue
        span = ladder_region[n] - params[n]
        share = 1.0 if span <= 0 else min(1.0, (region[n] - params[n]) / span)
        want += 2.0 + i + share * 1.0
    assert ev.frame_ms({"tiny": phases})["tiny"] == pytest.approx(want, rel=1e-12)
    # every layer in parts, as the ladder ran: the ladder's times (beside them, whole ones
    # at their time beside parts)
    assert ev.frame_ms({"tiny": every})["tiny"] == pytest.approx(
        sum(table[n].ms(every[n]) if every[n] > 1 else
            table[n].beside_ms if any(every[m] > 1 for m in nx.all_neighbors(cnn.graph, n))
            else table[n].whole_ms for n in cnn.order()), rel=1e-12)


def test_alone_groups_time_every_split_layer_with_whole_neighbours(small_app_file, tmp_path,
                                                                  monkeypatch):
    """For every k: the alone runs split disjoint groups covering the layers in parts at k,
    no two neighbours in one group, each at its Φ of k; the table files the alone times and
    the regions (networkx's components of the run with every layer at k)."""
    cnn = load_app(small_app_file).cnns["tiny"]
    ladder = ladder_profile.Ladder(cnn, tmp_path)
    edges = cnn.edges()
    params = {n: cnn.layer(n).param_count for n in cnn.order()}
    index = {}
    for i, ((label, k, group), (_, phases)) in enumerate(zip(ladder.runs, ladder.folders)):
        index[(k, group)] = i
        if group is None:
            continue
        every = ladder.folders[index[(k, None)]][1]
        split = {n for n in cnn.order() if phases[n] > 1}
        assert all(phases[n] == every[n] for n in split)
        assert not any(a in split and b in split for a, b in edges), label
    for k in ladder_profile.ladder_rows(cnn):
        every = ladder.folders[index[(k, None)]][1]
        groups = [{n for n, p in ladder.folders[i][1].items() if p > 1}
                  for (kk, g), i in index.items() if kk == k and g is not None]
        assert sorted(n for g in groups for n in g) == sorted(
            n for n in cnn.order() if every[n] > 1)

    def fake(folder, name, frames, threads, layout, keep=None, whole=False):      # ms = the run's index + 1
        i = int(folder.name[3:])
        return StepTimes({n: float(i + 1) for n in cnn.order()}, 1.0, 1)

    monkeypatch.setattr(ladder_profile, "step_times_in_child", fake)
    ladder.time_round()
    table = ladder.table()
    checked = set()
    for n in cnn.order():
        for k in ladder_profile.ladder_rows(cnn):
            every = ladder.folders[index[(k, None)]][1]
            p = every[n]
            if p == 1 or table[n].by_phases.get(p) != index[(k, None)] + 1:
                continue          # Φ filed from a smaller k (same Φ), or whole at k
            assert table[n].region[p] == _components(edges, every, params)[n]
            alone = [i for (kk, g), i in index.items()
                     if kk == k and g is not None and ladder.folders[i][1][n] > 1]
            assert table[n].alone[p] == alone[0] + 1
            checked.add(k)
    assert checked == set(ladder_profile.ladder_rows(cnn)) == {1, 2}
    # whole beside parts: the median over every run (all at k, or alone) where it was so
    for n in cnn.order():
        runs = [i + 1 for i, (_, phases) in enumerate(ladder.folders) if i > 0 and phases[n] == 1
                and any(phases[m] > 1 for m in nx.all_neighbors(cnn.graph, n))]
        assert table[n].beside_ms == (float(np.median(runs)) if runs else None), n


def test_a_region_steps_profile_prices_a_fused_layer_at_its_ladder_time(app_file, tmp_path):
    """A profile timed as region steps (`explore profile --steps regions`): a layer by parts
    with a neighbour by parts runs in bands with it, as in the ladder: its ladder time; one
    with no neighbour by parts runs a call per phase: placed by its region as before."""
    app = load_app(app_file)
    cnn = app.cnns["tiny"]
    params = {n: cnn.layer(n).param_count for n in cnn.order()}
    every = phases_for_rows(cnn, dict.fromkeys(cnn.order(), 1))
    ladder_region = _components(cnn.edges(), every, params)
    table = {n: (LayerTimes(1.0 + i, by_phases={every[n]: 3.0 + i}, region={every[n]: ladder_region[n]},
                            alone={every[n]: 2.0 + i}) if every[n] > 1 else LayerTimes(1.0 + i))
             for i, n in enumerate(cnn.order())}
    split = [n for n in cnn.order() if every[n] > 1]
    pair = next((a, b) for a, b in cnn.edges() if a in split and b in split)
    single = next(n for n in split if n not in pair and not any(
        m in pair for m in nx.all_neighbors(cnn.graph, n)))
    phases = {n: every[n] if n in (*pair, single) else 1 for n in cnn.order()}
    sizes = _components(cnn.edges(), phases, dict.fromkeys(cnn.order(), 1))
    assert sizes[pair[0]] == 2 and sizes[single] == 1
    got = {}
    for steps in ("layers", "regions"):
        prof = save_profile(DeviceProfile("ctx", models={"tiny": table}, meta={"steps": steps}),
                            tmp_path / f"{steps}.yaml")
        got[steps] = make_evaluator(app, str(prof)).frame_ms({"tiny": phases})["tiny"]
    region = _components(cnn.edges(), phases, params)
    fused = 0.0
    for n in pair:             # the layers timed "layers": placed by their region's parameters
        i = cnn.order().index(n)
        span = ladder_region[n] - params[n]
        share = 1.0 if span <= 0 else min(1.0, (region[n] - params[n]) / span)
        fused += (3.0 + i) - (2.0 + i + share * 1.0)
    assert got["regions"] == pytest.approx(got["layers"] + fused, rel=1e-12)
    assert fused > 0

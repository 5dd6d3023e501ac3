"""explorer.plan.model / plan_file: a Plan of frozen records, written to plan.json with a
schema key and read back to an equal Plan; plan.json files written before the schema key
(data/plan_no_schema.json: Table 12 app 1 as `explore` wrote it then) still load, and a
file of the wrong shape is refused in one line."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from csdf.model import EdgeId
from csdf.parts import all_parts
from csdf.tiling import Group
from explorer.plan.model import SCHEMA, Constraints, PlanBuffer, PlanEdge, PlanPartition, to_json
from explorer.plan.plan_file import from_dict, from_json
from sdf3.errors import InputError
from deploy_fixtures import make_app, tiny_cnn

OLD = Path(__file__).resolve().parent / "data" / "plan_no_schema.json"


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return tiny_cnn(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def plan(cnn):
    from explorer.plan.derive import derive, plan_for
    app = make_app([cnn], split={cnn.name: 5}, pipelined=True)
    return plan_for(app, derive(app, {cnn.name: all_parts(cnn)}), {cnn.name: 12.5}, True, [1, 0])


def test_old_plan_loads_into_records_and_writes_the_same_data_back():
    data = json.loads(OLD.read_text())
    assert "schema" not in data
    plan = from_json(OLD)
    assert plan.constraints == Constraints(data["constraints"]["memory_bytes"], data["constraints"]["fps"])
    assert [p.name for p in plan.partitions] == ["mobilenet_v2.all"]
    assert plan.partitions[0].layers == tuple(data["partitions"][0]["layers"])
    assert len(plan.edges) == len(data["edges"]) and len(plan.buffers) == len(data["buffers"])
    for name, e in data["edges"].items():                        # element by element
        got = plan.edges[EdgeId.parse(name)]
        assert (got.buffer, got.elements, got.rows, list(got.shape)) == \
            (e["buffer"], e["elements"], e["rows"], e["shape"])
    for b, raw in zip(plan.buffers, data["buffers"]):
        assert [str(e) for e in b.edges] == raw["edges"]
        assert (b.elements, b.bytes, b.offset) == (raw["elements"], raw["bytes"], raw.get("offset"))
    written = plan.to_dict()
    assert written.pop("schema") == SCHEMA
    assert written == data and list(written) == list(data)


def test_json_round_trip(plan, tmp_path):
    assert isinstance(plan.partitions[0], PlanPartition) and isinstance(plan.buffers[0], PlanBuffer)
    copies = [e for e in plan.edges if e.copy]
    assert copies and {e.copy for e in copies} == {1, 2}     # the pipeline's double buffers
    to_json(plan, tmp_path / "plan.json")
    data = json.loads((tmp_path / "plan.json").read_text())
    assert data["schema"] == SCHEMA
    assert set(data["edges"]) == {str(e) for e in plan.edges}
    back = from_json(tmp_path / "plan.json")
    assert back == plan
    tiled = dataclasses.replace(plan, tilings={"tiny": (Group(("conv1", "relu1"), 2, 3),)})
    data = tiled.to_dict()
    assert data["tilings"] == {"tiny": [{"layers": ["conv1", "relu1"], "grid": [2, 3]}]}
    assert from_dict(json.loads(json.dumps(data))) == tiled


def test_plan_and_records_are_frozen(plan):
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.memory_bytes = 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.partitions[0].processor = "cpu"
    edge = next(iter(plan.edges.values()))
    assert isinstance(edge, PlanEdge)
    with pytest.raises(dataclasses.FrozenInstanceError):
        edge.rows = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.constraints.memory_bytes = 1


@pytest.mark.parametrize("damage, message", [
    (lambda d: d.pop("edges"), "missing key 'edges'"),
    (lambda d: d.update(schema=1), "key 'schema': expected 2, got 1"),
    (lambda d: d.update(partitions={}), "key 'partitions' must be a non-empty list"),
    (lambda d: d["partitions"].append("x"), "partitions[1]: expected {name, cnn, layers, processor}"),
    (lambda d: d["edges"].update({"nodot->x": {"buffer": 0, "rows": 1}}),
     "edges: 'nodot->x' is not an edge name"),
    (lambda d: d["edges"].update({"m.a->b": {"rows": 1}}), "edges.m.a->b: expected integer 'buffer' and 'rows'"),
    (lambda d: d["buffers"][0].pop("bytes"), "buffers[0]: expected {edges, elements, bytes}"),
    (lambda d: d["buffers"][0]["edges"].append("bad"), "buffers[0].edges: 'bad' is not an edge name"),
    (lambda d: d.update(tilings={"m": [{"layers": ["a"]}]}), "key 'tilings' must map each CNN"),
    (lambda d: d.update(constraints=[]), "key 'constraints' must be {memory_bytes, fps"),
])
def test_wrong_shapes_are_refused_in_one_line(damage, message):
    data = json.loads(OLD.read_text())
    damage(data)
    with pytest.raises(InputError) as err:
        from_dict(data, "p.json")
    assert str(err.value).startswith("p.json: ") and message in str(err.value)
    assert "\n" not in str(err.value)

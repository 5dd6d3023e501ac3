"""The planner registry (explorer.memory.placement): every registered planner's properties
agree with what the derivation does with it, on Liberis & Lane's seven-operator example (their
Figure; tests/explorer/memory/test_reorder.py has its peaks) where the topological order peaks
at 5,216 elements and the least-peak order at 4,960; an unknown name is refused in one line.

The paper's figures under `shared-objects` (Tables 1, 8, 9 and 12) are checked where they
were worked: tests/explorer/memory/test_reuse.py (Algorithm 1), tests/explorer/plan/test_derive.py
(the derivation through the registry: test_reuse_only_is_table8,
test_table10_chromosome_gives_table9) and tests/explorer/report/test_baselines.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from explorer.app.appfile import load_app
from explorer.memory.buffers import buffer_elements
from explorer.memory.lifetimes import edge_uses
from explorer.memory.placement import DEFAULT, NAMES, PLANNERS, place, planner
from explorer.memory.reorder import partition_order
from explorer.memory.validity import check_plan
from explorer.plan.derive import derive, uniform_phases
from sdf3.errors import InputError

ROOT = Path(__file__).resolve().parents[4]

# Liberis & Lane's operators 1..7 as layers l1..l7 (l0 the input), tensor sizes in elements:
# l1's output (3,136) is read by l2 and l4, so one tensor is stored for two edges
LIBERIS_LANE = """
name: liberis-lane
platform: jetson-tx2
precision: fp32
cnns:
  - name: N
    fps: 0
    model:
      synthetic:
        layers: [l0, l1, l2, l3, l4, l5, l6, l7]
        edges:
          l0->l1: [1, 2, 28, 28]
          l1->l2: [1, 4, 28, 28]
          l1->l4: [1, 4, 28, 28]
          l2->l3: [1, 2, 28, 28]
          l3->l5: [1, 2, 16, 16]
          l4->l6: [1, 2, 16, 16]
          l5->l7: [1, 1, 16, 16]
          l6->l7: [1, 1, 16, 16]
        outputs:
          l7: [1, 2, 16, 16]
    partitions:
      - {name: P, layers: [l0, l7], processor: gpu}
"""


@pytest.fixture(scope="module")
def app_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("planners") / "liberis_lane.yaml"
    path.write_text(LIBERIS_LANE)
    return path


def test_registry_is_keyed_by_name():
    assert set(NAMES) == set(PLANNERS) and NAMES[0] == DEFAULT
    assert all(PLANNERS[n].name == n for n in NAMES)
    assert all(isinstance(getattr(PLANNERS[n], a), bool) for n in NAMES
               for a in ("per_tensor", "at_offsets", "reorders"))
    # the schedule policies compare candidates on tensor uses
    assert all(p.per_tensor for p in PLANNERS.values() if p.reorders)
    # both kinds are registered, so every property below is checked both ways
    for a in ("per_tensor", "at_offsets", "reorders"):
        assert {getattr(p, a) for p in PLANNERS.values()} == {True, False}, a


@pytest.mark.parametrize("name", NAMES)
def test_properties_agree_with_the_derivation(app_file, name):
    app = load_app(app_file)
    app.placement = name
    p = planner(name)
    d = derive(app, uniform_phases(app, False))
    stored = {x for u in d.uses for x in u.stored}
    assert check_plan(d.uses, d.buffers, app.pipelines) == []
    names = [u.name for u in d.uses]
    where = {x: i for i, b in enumerate(d.buffers) for x in b.edges}
    if p.per_tensor:           # l1's tensor: one use storing both edges, in one buffer
        assert "N.l1->*" in names and {"N.l1->l2", "N.l1->l4"} <= stored
        assert "N.l1->l2" not in names and "N.l1->l4" not in names
        assert len(d.uses) == 7
    else:                      # one use per edge, in two buffers (they are alive together)
        assert "N.l1->l2" in names and "N.l1->l4" in names
        assert where["N.l1->l2"] != where["N.l1->l4"]
        assert len(d.uses) == 8
    if p.at_offsets:           # each use its own buffer at an offset; the arena its extent
        assert len(d.buffers) == len(d.uses)
        assert all(b.offset is not None and len(b.edges) == 1 for b in d.buffers)
        assert buffer_elements(d.buffers) == max(b.offset + b.size for b in d.buffers)
    else:                      # shared objects one after another (Eq. 3)
        assert all(b.offset is None for b in d.buffers)
        assert len(d.buffers) < len(d.uses)
        assert buffer_elements(d.buffers) == sum(b.size for b in d.buffers)
    firings = d.parts["N.P"].firings
    topological = app.cnns["N"].order()
    if p.reorders:             # the least-peak order, which places in its 4,960 elements
        assert firings == partition_order(app, "N.P").order != topological
        assert firings == ["l0", "l1", "l4", "l6", "l2", "l3", "l5", "l7"]
        assert buffer_elements(d.buffers) == 4960
    else:                      # the paper's: the topological order, demand-driven
        assert firings == topological


def test_shared_objects_is_algorithm1_on_table8():
    """Through the registry, `shared-objects` places the worked example as Table 8."""
    app = load_app(ROOT / "apps" / "worked_example.yaml")
    uses = edge_uses(app)
    buffers = planner("shared-objects").place(uses, app.pipelines)
    assert sum(b.size for b in buffers) == 32778 == buffer_elements(buffers)
    assert place(uses, app.pipelines, "shared-objects") == buffers


def test_unknown_name_is_refused_in_one_line(app_file):
    with pytest.raises(InputError) as err:
        planner("best-fit")
    message = str(err.value)
    assert "\n" not in message and "'best-fit'" in message
    assert all(n in message for n in NAMES)
    app = load_app(app_file)
    app.placement = "shared_objects"
    with pytest.raises(InputError, match="'shared_objects'"):
        derive(app, uniform_phases(app, False))

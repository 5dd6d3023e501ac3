"""A pareto.json edited by hand (memtrade/front_check.py): every edit of a point's genes,
of a field's type, of the listed fps, or another app's front gives either the plan the
point's genes derive to or one line naming the file and key, never a traceback. The front
is the tiny CNN's, explored once for the test session (tests/refusals.py)."""
from __future__ import annotations

import copy
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from memtrade.front_point import plan_of_point
from sdf3.errors import InputError
from refusals import refused, tiny_least_memory

FAST = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    """The tiny CNN's least-memory front (tests/refusals.py, built once per session)."""
    root = tmp_path_factory.mktemp("front_edits")
    tiny_least_memory(root)
    data = json.loads((root / "least" / "pareto.json").read_text())
    assert len(data["points"]) >= 2
    return root, data


def edited(root, data, edit):
    """pareto.json with `edit(data)` applied, written to its own folder; its path."""
    data = copy.deepcopy(data)
    data = edit(data) or data
    folder = root / "edits"
    folder.mkdir(exist_ok=True)
    path = folder / "pareto.json"
    path.write_text(json.dumps(data))
    return path


def outcome(path, n=0):
    """The plan of point n, the warnings said, or the refusal's line."""
    said = []
    try:
        return plan_of_point(path, n, said.append), said, None
    except InputError as err:
        assert "\n" not in str(err)
        return None, said, str(err)


def upper(root):
    """Each gene's range as the app's problem has it, found independently of the front file:
    the front lists every gene's label; the ladder's upper end of a layer is its part sizes."""
    from explorer.app.appfile import load_app
    from explorer.plan.genes import gene_space
    app = load_app(root / "tiny.yaml")
    space = gene_space(app, app.search.granularity)
    return list(space.labels), list(space.upper)


@FAST
@given(genes=st.lists(st.integers(-3, 12), min_size=0, max_size=4), n=st.integers(0, 1))
def test_edited_genes_derive_or_are_refused(front, genes, n):
    root, data = front
    labels, top = upper(root)
    assert labels == data["genes"]
    path = edited(root, data, lambda d: d["points"][n].__setitem__("genes", genes))
    plan, _, err = outcome(path, n)
    if len(genes) != len(top):
        assert err.endswith(f"genes: expected {len(top)} (one per gene of the app), got {len(genes)}")
    elif any(not 0 <= g <= u for g, u in zip(genes, top)):
        i = next(i for i, (g, u) in enumerate(zip(genes, top)) if not 0 <= g <= u)
        assert err.endswith(f"gene {labels[i]}: expected 0 to {top[i]}, got {genes[i]}")
    elif genes == data["points"][n]["genes"]:
        assert err is None and list(plan.genes) == genes
    else:            # in range, under point n's memory: derived, or refused for its memory
        listed = data["points"][n]["memory_bytes"]
        if err is None:
            assert list(plan.genes) == genes and plan.memory_bytes == listed
        else:
            derived = int(err.split("derives to ")[1].split(" B")[0])
            assert derived != listed and f"not the {listed} B it lists" in err
            # where the genes are another point's, the memory derived is the one that
            # point lists, as `explore` wrote it
            others = {tuple(p["genes"]): p["memory_bytes"] for p in data["points"]}
            assert others.get(tuple(genes), derived) == derived


NOT_WHOLE = st.one_of(st.none(), st.booleans(), st.text(max_size=4),
                      st.floats(allow_nan=False).filter(lambda f: f != int(f) if math.isfinite(f) else True),
                      st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(), max_size=1))
NOT_NUMBER = st.one_of(st.none(), st.booleans(), st.text(max_size=4), st.lists(st.integers(), max_size=2))


@FAST
@given(value=NOT_WHOLE, field=st.sampled_from(["gene", "memory_bytes", "point"]))
def test_a_field_of_the_wrong_type_is_one_line(front, value, field):
    root, data = front

    def edit(d):
        if field == "gene":
            d["points"][0]["genes"][0] = value
        elif field == "point":
            d["points"][0] = value
        else:
            d["points"][0]["memory_bytes"] = value
    plan, _, err = outcome(edited(root, data, edit))
    key = {"gene": "points[0].genes", "memory_bytes": "points[0].memory_bytes",
           "point": "points[0]"}[field]
    assert plan is None and f"pareto.json: {key}" in err and ": expected " in err, err


@FAST
@given(value=NOT_NUMBER)
def test_fps_not_a_number_is_one_line(front, value):
    root, data = front
    plan, _, err = outcome(edited(root, data, lambda d: d["points"][0]["fps"].__setitem__("tiny", value)))
    assert plan is None and "points[0].fps: expected an object of CNN name -> frames per second" in err


@FAST
@given(fps=st.floats(0, 1e12, allow_nan=False))
def test_edited_fps_are_computed_again_and_said(front, fps):
    root, data = front
    listed = data["points"][1]["fps"]["tiny"]
    plan, said, err = outcome(edited(root, data, lambda d: d["points"][1]["fps"].__setitem__("tiny", fps)), 1)
    assert err is None
    assert plan.fps["tiny"] == pytest.approx(listed, rel=1e-9)       # the genes', not the file's
    differs = abs(fps - listed) > 1e-9 * max(listed, 1.0)
    assert len(said) == int(differs)
    if differs:
        assert f"lists tiny {fps:g} fps" in said[0] and "which the plan carries" in said[0]


TOP_EDITS = [
    ("points", {}, "points: expected a list of points"),
    ("app", None, "app: expected the path of the application file"),
    ("app", 3, "app: expected the path of the application file"),
    ("cnns", "tiny", "cnns: expected a list of names"),
    ("genes", [1, 2], "genes: expected a list of names"),
    ("precision", "fp99", "precision: expected one of fp32, fp16, mixed, int8"),
    ("placement", 7, "placement: expected a placement's name"),
    ("granularity", "xx", "granularity: expected one of ladder, binary"),
    ("tiling", "zz", "tiling: expected null or one of parts, tiles, both"),
    ("evaluator", 5, "evaluator: expected a profile's name or path, or null"),
    ("constraints", [], "constraints: expected an object with memory_bytes and fps"),
    ("constraints", {"memory_bytes": "x"}, "constraints.memory_bytes: expected a whole number"),
    ("constraints", {"fps": {"tiny": "fast"}}, "constraints.fps: expected an object"),
]


@pytest.mark.parametrize("key,value,words", TOP_EDITS)
def test_a_top_level_field_edited_is_one_line(front, key, value, words):
    root, data = front
    plan, _, err = outcome(edited(root, data, lambda d: d.__setitem__(key, value)))
    assert plan is None and words in err, err


def test_another_apps_front_is_refused(front):
    root, data = front
    (root / "other.yaml").write_text("name: o\ncnns:\n  - {name: other, model: tiny.onnx}\n")
    plan, _, err = outcome(edited(root, data, lambda d: d.__setitem__("app", str(root / "other.yaml"))))
    assert plan is None and "a front of CNNs tiny, but its app" in err and "has CNNs other" in err


@pytest.mark.parametrize("n", [-1, 99, True, 1.0, "0"])
def test_a_point_number_that_names_no_point(front, n):
    root, data = front
    plan, _, err = outcome(edited(root, data, lambda d: None), n)
    assert plan is None and err.startswith("--point: expected")


def test_the_command_refuses_in_one_line_and_writes_nothing(front, tmp_path, capsys):
    root, data = front
    path = edited(root, data, lambda d: d["points"][0].__setitem__("genes", ["a", 2]))
    refused(capsys, ["deploy", str(path), "--point", "0", "--out", str(tmp_path / "d")],
            "points[0].genes: expected a list of whole numbers")
    assert not (tmp_path / "d").exists()


def test_the_api_checks_a_front_point_it_is_given(front):
    import dataclasses
    import memtrade
    root, _ = front
    found = memtrade.explore(str(root / "tiny.yaml"), mem="0", population=8, generations=2,
                             workers=1, time_limit=30)
    with pytest.raises(InputError, match="gene tiny.conv1: expected 0 to"):
        found.plan_of(dataclasses.replace(found.points[0], genes=(99, 0)))
    with pytest.raises(InputError, match="--point: expected"):
        found.plan_of(len(found.points))
    said = []
    plan = found.plan_of(dataclasses.replace(found.points[0], fps={"tiny": 1.0}), said.append)
    assert plan.fps["tiny"] == pytest.approx(found.points[0].fps["tiny"]) and len(said) == 1

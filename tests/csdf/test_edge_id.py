"""csdf.model.EdgeId: the one identity of an edge in plans, reports and deployments, written
and read back by one formatter (str, edge_name) and one parser (EdgeId.parse)."""
from __future__ import annotations

import pytest

from csdf.model import EdgeId, edge_name
from sdf3.errors import InputError


@pytest.mark.parametrize("name, fields", [
    ("net.conv1->relu1", ("net", "conv1", "relu1", 0)),
    ("net.conv1->relu1(1)", ("net", "conv1", "relu1", 1)),
    ("net.conv1->relu1(2)", ("net", "conv1", "relu1", 2)),
    # layer names from ONNX may hold dots, slashes and "->"-free punctuation
    ("mobilenet_v2.features.0/conv->features.1", ("mobilenet_v2", "features.0/conv", "features.1", 0)),
    ("m.a(3)x->b", ("m", "a(3)x", "b", 0)),
    ("m.src->*(2)", ("m", "src", "*", 2)),         # a tensor stored once for all readers
    ("m.a->b(0)", ("m", "a", "b(0)", 0)),           # no copy 0: one name, one identity
    ("m.a->b(12)", ("m", "a", "b", 12)),
])
def test_parse_reads_each_field(name, fields):
    e = EdgeId.parse(name)
    assert (e.cnn, e.src, e.dst, e.copy) == fields
    assert str(e) == name                            # and writes the same name back
    assert edge_name(*fields) == name


@pytest.mark.parametrize("cnn, src, dst, copy", [
    ("a", "b", "c", 0), ("a", "b.c", "d.e", 1), ("yolo", "conv_0", "Add_17", 2),
    ("n", "x(1)y", "z", 0),
])
def test_format_then_parse_is_the_identity(cnn, src, dst, copy):
    e = EdgeId(cnn, src, dst, copy)
    assert EdgeId.parse(str(e)) == e
    assert EdgeId.parse(edge_name(cnn, src, dst, copy)) == e


def test_copies_and_ends():
    e = EdgeId.parse("net.a->b(2)")
    assert e.ends == ("a", "b")
    assert str(e.with_copy(0)) == "net.a->b" and str(e.with_copy(1)) == "net.a->b(1)"
    assert EdgeId.parse("net.a->b") == e.with_copy(0)
    assert len({EdgeId("n", "a", "b"), EdgeId.parse("n.a->b"), EdgeId("n", "a", "b", 1)}) == 2
    with pytest.raises(AttributeError):
        e.copy = 1                                    # frozen: safe as a dict key


@pytest.mark.parametrize("bad", ["a->b", "net.ab", "net.->b", "net.a->", ".a->b", "", 7, None])
def test_bad_names_are_refused_in_one_line(bad):
    with pytest.raises(InputError) as err:
        EdgeId.parse(bad, "plan.json: edges")
    msg = str(err.value)
    assert msg.startswith("plan.json: edges: ") and "\n" not in msg
    assert "is not an edge name 'cnn.src->dst'" in msg

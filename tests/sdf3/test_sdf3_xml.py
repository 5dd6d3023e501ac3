"""SDF3 XML: reading, writing in the shape SDF3's parser needs, lossless round trips."""
from __future__ import annotations

import random

import pytest
from lxml import etree

from sdf3.errors import InputError
from sdf3.graph import Actor, Channel, Graph
from sdf3.xml import parse_list, read_xml, to_bytes, write_xml

from conftest import DATA  # noqa: E402
SHARED = DATA / "sdf3"


def random_graph(rng: random.Random, n: int = 5) -> Graph:
    g = Graph(f"g{rng.randrange(1000)}")
    for i in range(n):
        ph = rng.randint(1, 6)
        g.add_actor(Actor(f"a{i}", ph, [rng.randint(0, 9) for _ in range(ph)], f"t{i}",
                          rng.choice(["p0", "p1"])))
    for k in range(n + 2):
        a, b = rng.randrange(n), rng.randrange(n)
        A, B = g.actors[f"a{a}"], g.actors[f"a{b}"]
        g.add_channel(Channel(f"c{k}", A.name, B.name, [rng.randint(0, 4) for _ in range(A.phases)],
                              [rng.randint(0, 4) for _ in range(B.phases)], rng.randint(0, 3),
                              rng.choice([1, 1, 96, 3 * 224]), f"o{k}", f"i{k}",
                              rng.choice([None, None, 7])))
    return g


@pytest.mark.parametrize("seed", range(20))
def test_round_trip_is_lossless(seed, tmp_path):
    g = random_graph(random.Random(seed))
    write_xml(g, tmp_path / "g.xml")
    back = read_xml(tmp_path / "g.xml")
    assert back == g
    assert to_bytes(back) == to_bytes(g)


def test_written_xml_has_sdf3_shape():
    g = random_graph(random.Random(7))
    root = etree.fromstring(to_bytes(g))
    assert root.tag == "sdf3" and root.get("type") == "csdf" and root.get("version") == "1.0"
    assert not any("noNamespaceSchemaLocation" in k for k in root.attrib)
    csdf = root.find("applicationGraph/csdf")
    for actor in csdf.findall("actor"):
        assert actor.get("type")
        phases = g.actors[actor.get("name")].phases
        names = [p.get("name") for p in actor.findall("port")]
        assert len(names) == len(set(names))
        for port in actor.findall("port"):
            assert port.get("type") in ("in", "out")
            assert len(port.get("rate").split(",")) == phases
        proc = root.find(f"applicationGraph/csdfProperties/actorProperties[@actor='{actor.get('name')}']/processor")
        assert proc.get("default") == "true"
        assert len(proc.find("executionTime").get("time").split(",")) == phases
    bounded = [c for c in g.channels if c.capacity is not None and c.src != c.dst]
    assert len(csdf.findall("channel")) == len(g.channels) + len(bounded)
    for cp in root.iterfind("applicationGraph/csdfProperties/channelProperties"):
        bs = cp.find("bufferSize")       # SDF3's schema requires sz, src, dst and mem
        assert bs is None or all(bs.get(k) is not None for k in ("sz", "src", "dst", "mem"))
        assert [e.tag for e in cp] in (["bufferSize"], ["tokenSize"], ["bufferSize", "tokenSize"])


def test_ports_get_unique_names_when_channels_have_none():
    g = Graph("p")
    g.add_actor(Actor("a", 2))
    g.add_actor(Actor("b", 1))
    g.add_channel(Channel("x", "a", "b", [1, 0], [1]))
    g.add_channel(Channel("y", "a", "b", [0, 1], [1]))
    back = read_xml(to_bytes(g))
    ports = [(c.src_port, c.dst_port) for c in back.channels]
    assert len({p[0] for p in ports}) == 2 and len({p[1] for p in ports}) == 2
    assert [(c.prod, c.cons) for c in back.channels] == [([1, 0], [1]), ([0, 1], [1])]
    assert back.actors["a"].exec_times == [1, 1]  # default time 1 written explicitly


def test_reads_shared_files_with_repeat_notation():
    g = read_xml(SHARED / "ex2_two_actor.xml")  # uses rate="5*1"
    assert g.channel("selfP").prod == [1] * 5 and g.channel("selfP").initial_tokens == 1
    assert g.channel("P2C").cons == [3, 1, 1, 0, 0]
    assert g.actors["C"].exec_times == [4, 3, 3, 0, 0]
    assert read_xml(to_bytes(g)) == g


def test_parse_list():
    assert parse_list("3,1,1,0,0", "x") == [3, 1, 1, 0, 0]
    assert parse_list("2*3, 1", "x") == [3, 3, 1]


BAD = {
    "rate": ('<actor name="a" type="a"><port type="out" name="o" rate="1,x"/></actor>', "rate"),
    "phases": ('<actor name="a" type="a"><port type="out" name="o" rate="1,1"/>'
               '<port type="in" name="i" rate="1"/></actor>', "expected 2 rates"),
    "port": ('<actor name="a" type="a"><port type="out" name="o" rate="1"/></actor>'
             '<channel name="c" srcActor="a" srcPort="zz" dstActor="a" dstPort="o"/>', "no port 'zz'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_files_raise_input_error_naming_the_spot(case):
    body, words = BAD[case]
    xml = f'<sdf3 type="csdf" version="1.0"><applicationGraph name="g"><csdf name="g" type="g">{body}</csdf></applicationGraph></sdf3>'
    with pytest.raises(InputError) as e:
        read_xml(xml.encode())
    assert words in str(e.value) and "\n" not in str(e.value)


def test_missing_file_is_input_error(tmp_path):
    with pytest.raises(InputError, match="nope.xml"):
        read_xml(tmp_path / "nope.xml")

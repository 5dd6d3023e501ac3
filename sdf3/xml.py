"""Read and write SDF3's CSDF XML (lxml), in the shape `sdf3analysis-csdf` accepts.

Shape (see ../shared/sdf3/README.md): <sdf3 type="csdf" version="1.0"> / applicationGraph /
csdf with actor (type required) and port (type in|out, name, rate "r0,r1,..." one entry per
phase; "N*v" read too) and channel (srcActor srcPort dstActor dstPort initialTokens); then
csdfProperties / actorProperties actor= / processor type= default="true" / executionTime
time="t0,t1,...". Token sizes other than 1 go to channelProperties/tokenSize sz=.

Capacities are written the way SDF3's CSDF analyses see them (they never read bufferSize): a
channel of capacity C gets a reverse channel `<name>` + CAPACITY_SUFFIX from its destination
back to its source, with the rates swapped and C - initialTokens initial tokens (a firing of
the source claims room when it starts, one of the destination frees it when it ends). The
capacity is also kept in channelProperties/bufferSize in the form SDF3's schema requires
(sz, src, dst, mem; see docs/sdf3_engine.md). Reading folds such a reverse channel back into
the capacity, so round trips are lossless; `read_xml(..., as_sdf3=True)` instead keeps it as
a plain channel and ignores bufferSize, which is the graph SDF3 analyses.
No xsi schema attribute: SDF3's XSD rejects a rate of 0.
"""
from __future__ import annotations

from pathlib import Path

from lxml import etree

from sdf3.errors import InputError
from sdf3.graph import Actor, Channel, Graph

CAPACITY_SUFFIX = "~capacity"   # the reverse channel that models a channel's capacity


def parse_list(text: str, where: str) -> list[int]:
    """'3,1,1,0,0' or '5*1' or '2*3,1' -> integers."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        try:
            if "*" in part:
                n, v = part.split("*")
                out.extend([int(v)] * int(n))
            else:
                out.append(int(part))
        except ValueError:
            raise InputError(f"{where}: expected a comma-separated list of integers "
                             f"(or N*v), got {text!r}") from None
    if any(v < 0 for v in out):
        raise InputError(f"{where}: expected non-negative integers, got {text!r}")
    return out


def _need(el, attr: str, where: str) -> str:
    v = el.get(attr)
    if v is None:
        raise InputError(f"{where}: <{el.tag}> lacks the attribute {attr!r}")
    return v


def read_xml(source: str | Path | bytes, as_sdf3: bool = False) -> Graph:
    """A Graph from an SDF3 CSDF file (path) or its bytes. Bad files raise InputError.
    Capacity channels (see the module docstring) fold into `Channel.capacity` unless
    `as_sdf3`, which returns the graph as SDF3's analyses see it."""
    where = "<bytes>" if isinstance(source, bytes) else str(source)
    try:
        root = (etree.fromstring(source) if isinstance(source, bytes)
                else etree.parse(str(source)).getroot())
    except (OSError, etree.XMLSyntaxError) as e:
        raise InputError(f"{where}: not readable SDF3 XML ({str(e).splitlines()[0]})") from None
    if root.tag != "sdf3" or root.get("type") not in ("csdf", "sdf"):
        raise InputError(f"{where}: expected root <sdf3 type=\"csdf\">, got <{root.tag}>")
    app = root.find("applicationGraph")
    gel = app.find("csdf") if app is not None else None
    if gel is None and app is not None:
        gel = app.find("sdf")
    if gel is None:
        raise InputError(f"{where}: expected applicationGraph/csdf")
    g = Graph(gel.get("name") or (app.get("name") or "graph"))
    ports: dict[tuple[str, str], tuple[str, list[int]]] = {}
    for ael in gel.findall("actor"):
        name = _need(ael, "name", where)
        phases = None
        for pel in ael.findall("port"):
            pname = _need(pel, "name", f"{where}: actor {name}")
            ptype = _need(pel, "type", f"{where}: actor {name} port {pname}")
            rates = parse_list(_need(pel, "rate", f"{where}: actor {name} port {pname}"),
                               f"{where}: actor {name} port {pname} rate")
            if phases is None:
                phases = len(rates)
            elif len(rates) != phases:
                raise InputError(f"{where}: actor {name} port {pname}: expected {phases} rates "
                                 f"(one per phase), got {len(rates)}")
            ports[(name, pname)] = (ptype, rates)
        g.add_actor(Actor(name, phases or 1, [], ael.get("type", name), "p0"))
    props = app.find("csdfProperties")
    if props is None:
        props = app.find("sdfProperties")
    caps: dict[str, tuple[int | None, int]] = {}
    if props is not None:
        for apel in props.findall("actorProperties"):
            name = _need(apel, "actor", where)
            if name not in g.actors:
                raise InputError(f"{where}: actorProperties for unknown actor {name!r}")
            procs = apel.findall("processor")
            proc = next((p for p in procs if p.get("default") == "true"), procs[0] if procs else None)
            if proc is None:
                continue
            et = proc.find("executionTime")
            actor = g.actors[name]
            actor.processor = proc.get("type", "p0")
            if et is not None:
                times = parse_list(_need(et, "time", f"{where}: actor {name} executionTime"),
                                   f"{where}: actor {name} executionTime")
                if not any(True for k in ports if k[0] == name):
                    actor.phases = len(times)
                if len(times) != actor.phases:
                    raise InputError(f"{where}: actor {name} executionTime: expected "
                                     f"{actor.phases} times (one per phase), got {len(times)}")
                actor.exec_times = times
        for cpel in props.findall("channelProperties"):
            name = _need(cpel, "channel", where)
            ts, bs = cpel.find("tokenSize"), cpel.find("bufferSize")
            caps[name] = (_int_attr(bs, "sz", f"{where}: channel {name} bufferSize")
                          if bs is not None and not as_sdf3 else None,
                          _int_attr(ts, "sz", f"{where}: channel {name} tokenSize")
                          if ts is not None else 1)
    for cel in gel.findall("channel"):
        cname = _need(cel, "name", where)
        w = f"{where}: channel {cname}"
        s, sp = _need(cel, "srcActor", w), _need(cel, "srcPort", w)
        d, dp = _need(cel, "dstActor", w), _need(cel, "dstPort", w)
        for actor, port, kind in ((s, sp, "out"), (d, dp, "in")):
            if (actor, port) not in ports:
                raise InputError(f"{w}: actor {actor!r} has no port {port!r}")
            if ports[(actor, port)][0] != kind:
                raise InputError(f"{w}: port {actor}.{port} should be of type {kind!r}")
        try:
            init = int(cel.get("initialTokens", "0"))
        except ValueError:
            raise InputError(f"{w}: initialTokens should be an integer") from None
        cap, tsz = caps.get(cname, (None, 1))
        g.add_channel(Channel(cname, s, d, ports[(s, sp)][1], ports[(d, dp)][1], init, tsz,
                              sp, dp, cap))
    return g if as_sdf3 else _fold_capacities(g, where)


def _int_attr(el, attr: str, where: str) -> int:
    try:
        return int(_need(el, attr, where))
    except ValueError:
        raise InputError(f"{where}: {attr} should be an integer, got {el.get(attr)!r}") from None


def _fold_capacities(g: Graph, where: str) -> Graph:
    """Reverse channels named `<channel>~capacity` become that channel's capacity."""
    by_name = {c.name: c for c in g.channels}
    drop = set()
    for rev in g.channels:
        if not rev.name.endswith(CAPACITY_SUFFIX):
            continue
        fwd = by_name.get(rev.name[: -len(CAPACITY_SUFFIX)])
        if fwd is None or (rev.src, rev.dst, rev.prod, rev.cons) != (fwd.dst, fwd.src, fwd.cons, fwd.prod):
            raise InputError(f"{where}: channel {rev.name}: expected the reverse of channel "
                             f"{rev.name[: -len(CAPACITY_SUFFIX)]!r} (swapped ends and rates)")
        cap = rev.initial_tokens + fwd.initial_tokens
        if fwd.capacity is not None and fwd.capacity != cap:
            raise InputError(f"{where}: channel {fwd.name}: bufferSize sz={fwd.capacity} but its "
                             f"capacity channel holds {cap} tokens with the initial ones")
        fwd.capacity = cap
        drop.add(rev.name)
    g.channels = [c for c in g.channels if c.name not in drop]
    return g


def _rates(values: list[int]) -> str:
    return ",".join(str(v) for v in values)


def to_element(graph: Graph) -> etree._Element:
    root = etree.Element("sdf3", type="csdf", version="1.0")
    app = etree.SubElement(root, "applicationGraph", name=graph.name)
    gel = etree.SubElement(app, "csdf", name=graph.name, type=graph.name)
    aels = {}
    for a in graph.actors.values():
        aels[a.name] = etree.SubElement(gel, "actor", name=a.name, type=a.type or a.name)
    used: dict[str, set[str]] = {a: set() for a in graph.actors}

    def port(actor: str, given: str, prefix: str) -> str:
        name, i = given, 0
        while not name or name in used[actor]:
            name = f"{prefix}{i}"
            i += 1
        used[actor].add(name)
        return name

    links = []
    for ch in graph.channels:
        sp = port(ch.src, ch.src_port, "out")
        etree.SubElement(aels[ch.src], "port", type="out", name=sp, rate=_rates(ch.prod))
        dp = port(ch.dst, ch.dst_port, "in")
        etree.SubElement(aels[ch.dst], "port", type="in", name=dp, rate=_rates(ch.cons))
        links.append((ch.name, ch.src, sp, ch.dst, dp, ch.initial_tokens))
    for ch in _bounded(graph):           # after every given port name is taken
        sp = port(ch.dst, "", "capOut")
        etree.SubElement(aels[ch.dst], "port", type="out", name=sp, rate=_rates(ch.cons))
        dp = port(ch.src, "", "capIn")
        etree.SubElement(aels[ch.src], "port", type="in", name=dp, rate=_rates(ch.prod))
        links.append((ch.name + CAPACITY_SUFFIX, ch.dst, sp, ch.src, dp,
                      ch.capacity - ch.initial_tokens))
    for name, src, sp, dst, dp, tokens in links:
        attrs = dict(name=name, srcActor=src, srcPort=sp, dstActor=dst, dstPort=dp)
        if tokens:
            attrs["initialTokens"] = str(tokens)
        etree.SubElement(gel, "channel", **attrs)
    props = etree.SubElement(app, "csdfProperties")
    for a in graph.actors.values():
        ap = etree.SubElement(props, "actorProperties", actor=a.name)
        pr = etree.SubElement(ap, "processor", type=a.processor or "p0", default="true")
        etree.SubElement(pr, "executionTime",
                         time=_rates([a.exec_time(p) for p in range(a.phases)]))
    for ch in graph.channels:
        if ch.token_size != 1 or ch.capacity is not None:
            cp = etree.SubElement(props, "channelProperties", channel=ch.name)
            if ch.capacity is not None:  # SDF3's schema: sz on one tile; src/dst/mem if split
                etree.SubElement(cp, "bufferSize", sz=str(ch.capacity), src="0",
                                 dst=str(ch.capacity), mem="0")
            if ch.token_size != 1:
                etree.SubElement(cp, "tokenSize", sz=str(ch.token_size))
    return root


def _bounded(graph: Graph) -> list[Channel]:
    """Channels whose capacity is written as a reverse channel (self-loops keep theirs in
    bufferSize only: their own tokens already bound them)."""
    out = []
    for ch in graph.channels:
        if ch.capacity is None or ch.src == ch.dst:
            continue
        if ch.capacity < ch.initial_tokens:
            raise ValueError(f"channel {ch.name}: capacity {ch.capacity} is below its "
                             f"{ch.initial_tokens} initial tokens")
        if ch.name.endswith(CAPACITY_SUFFIX):
            raise ValueError(f"channel {ch.name}: names ending in {CAPACITY_SUFFIX!r} are "
                             "reserved for capacity channels")
        out.append(ch)
    return out


def to_bytes(graph: Graph) -> bytes:
    """The graph as SDF3 CSDF XML (UTF-8, with declaration)."""
    return etree.tostring(to_element(graph), xml_declaration=True, encoding="UTF-8",
                          pretty_print=True)


def write_xml(graph: Graph, path: str | Path) -> None:
    Path(path).write_bytes(to_bytes(graph))

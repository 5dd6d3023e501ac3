"""The deployment's manifest.json as the board runner reads it: read once into records
(namedtuples, which Python 3.6 has) holding only what the runner uses; the other
runner modules read attributes of these, never keys of the JSON.

The records mirror deploy/runtime/manifest_records.py (which the runner cannot import):
the same names for the same JSON keys. A key the runner needs that is missing, or of the
wrong kind, stops it with one line naming the file and the place of the key.

Part of the standalone runner (board_runner.py and its trt_*.py modules, copied beside a
deployment): Python 3.6 compatible, imports nothing of memtrade.
"""
import json
import os
from collections import namedtuple

FORMAT = "memtrade-deployment"

# a CNN input or output: its layer, NCHW shape and (outputs) stored layout (nchw, hncw)
Port = namedtuple("Port", "layer shape layout")
# a CNN: its input and output ports, its reference model (None: none) and partition names
Cnn = namedtuple("Cnn", "inputs outputs reference partitions")
# where an edge lives on the device: its arena offset, the bytes of one row, its layout
Edge = namedtuple("Edge", "device_offset row_bytes layout")
# one tensor a step binds (kinds of deploy/runtime/step_records.Binding): edge copies
# (even, odd frame), the first row `slot`, int32 `values` of a const, the sink `layer`
Binding = namedtuple("Binding", "kind name edges slot values layer")
# one step of a partition: its model (None: the Input layer's frame copy) and bindings
Step = namedtuple("Step", "model bind")
Partition = namedtuple("Partition", "name cnn steps")
# a port of a profile model: a tensor (`shape`, `dtype`) or an index vector (`values`)
ProfilePort = namedtuple("ProfilePort", "name shape dtype values")
# a per-layer model of `board_runner.py profile`: kind whole or part, its phases and ports
ProfileModel = namedtuple("ProfileModel", "cnn layer kind model phases ports")
# `models`: the step models' paths relative to the deployment; `cnns` in the file's order;
# `pipelines`: groups of partition names run as concurrent stages; `profile`: () without
Manifest = namedtuple("Manifest", "dtype precision device_arena_bytes models edges cnns "
                                  "partitions pipelines profile")


class BadManifest(Exception):
    """A key the runner needs is missing or of the wrong kind (`where`: its place)."""


KINDS = {int: "an integer", str: "a string", list: "a list", dict: "an object",
         type(None): "null"}


def _need(data, key, where, kind=None):
    """data[key], which must be there and (given `kind`, a type or tuple of types) of that kind."""
    if not isinstance(data, dict) or key not in data:
        raise BadManifest("%s: expected key '%s'" % (where, key))
    value = data[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if kind is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise BadManifest("%s: key '%s' must be %s, got %r"
                          % (where, key, " or ".join(KINDS[k] for k in kinds), value))
    return value


def _ints(data, key, where):
    values = _need(data, key, where, list)
    if not all(isinstance(v, int) for v in values):
        raise BadManifest("%s: key '%s' must list integers, got %r" % (where, key, values))
    return tuple(values)


def _port(data, where):
    layout = data.get("layout") if isinstance(data, dict) else None
    return Port(data.get("layer", "") if isinstance(data, dict) else "",
                _ints(data, "shape", where), layout)


def _cnn(data, where):
    inputs = tuple(_port(p, "%s.inputs[%d]" % (where, i))
                   for i, p in enumerate(_need(data, "inputs", where, list)))
    if not inputs:
        raise BadManifest("%s: key 'inputs' lists no input" % where)
    outputs = tuple(_port(p, "%s.outputs[%d]" % (where, i))
                    for i, p in enumerate(data.get("outputs", [])))
    return Cnn(inputs, outputs, data.get("reference") or None,
               tuple(data.get("partitions", [])))


def _edge(data, where):
    return Edge(_need(data, "device_offset", where, int), _need(data, "row_bytes", where, int),
                _need(data, "layout", where, str))


def _binding(data, where):
    kind = _need(data, "kind", where, str)
    edges = tuple(_need(data, "edges", where, list)) if kind in ("edge", "frame", "tile") else ()
    return Binding(kind, data.get("name"), edges,
                   _need(data, "slot", where, int) if kind in ("edge", "output") else 0,
                   _ints(data, "values", where) if kind == "const" else (),
                   _need(data, "layer", where, str) if kind == "output" else None)


def _step(data, where):
    model = _need(data, "model", where, (str, type(None)))
    return Step(model, tuple(_binding(b, "%s.bind[%d]" % (where, i))
                             for i, b in enumerate(_need(data, "bind", where, list))))


def _partition(data, where):
    name = _need(data, "name", where, str)
    where = "%s.%s" % (where, name)
    return Partition(name, _need(data, "cnn", where, str),
                     tuple(_step(s, "%s.steps[%d]" % (where, t))
                           for t, s in enumerate(_need(data, "steps", where, list))))


def _profile_model(data, where):
    ports = []
    for i, p in enumerate(_need(data, "ports", where, list)):
        at = "%s.ports[%d]" % (where, i)
        if isinstance(p, dict) and "values" in p:
            ports.append(ProfilePort(_need(p, "name", at, str), None, None, _ints(p, "values", at)))
        else:
            ports.append(ProfilePort(_need(p, "name", at, str), _ints(p, "shape", at),
                                     _need(p, "dtype", at, str), None))
    return ProfileModel(_need(data, "cnn", where, str), _need(data, "layer", where, str),
                        _need(data, "kind", where, str), _need(data, "model", where, str),
                        data.get("phases", 1), tuple(ports))


def read_manifest(data, where="manifest.json"):
    """The Manifest record of a manifest.json's parsed JSON `data` (BadManifest if a key the
    runner needs is missing or of the wrong kind)."""
    at = where + ": "
    edges = _need(data, "edges", where, dict)
    cnns = _need(data, "cnns", where, dict)
    groups = _need(data, "pipelines", where, list)
    return Manifest(
        _need(data, "dtype", where, str), data.get("precision", "fp32"),
        _need(data, "device_arena_bytes", where, int), tuple(data.get("models", {})),
        {n: _edge(e, at + "edges." + n) for n, e in edges.items()},
        {n: _cnn(c, at + "cnns." + n) for n, c in cnns.items()},
        tuple(_partition(p, at + "partitions") for p in _need(data, "partitions", where, list)),
        tuple(tuple(g) for g in groups),
        tuple(_profile_model(p, "%sprofile[%d]" % (at, i))
              for i, p in enumerate(data.get("profile") or [])))


def load_manifest(deploy_dir):
    """The Manifest of DIR/manifest.json; one line and exit where it is not a deployment
    this runner reads."""
    path = os.path.join(deploy_dir, "manifest.json")
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SystemExit("%s: not a memtrade deployment" % deploy_dir)
    try:
        return read_manifest(data, path)
    except BadManifest as err:
        raise SystemExit(str(err))

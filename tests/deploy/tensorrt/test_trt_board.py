"""The board runner's arena executor (deploy/tensorrt/trt_board.py) without a GPU: stand-ins
for the CUDA runtime and TensorRT engines record every address Board binds and every copy
it makes, checked against addresses computed from manifest.json's own keys, for one
partition run in turn and for two partitions pipelined (one thread per stage)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from csdf.parts import all_parts
from deploy.build.derive import derive
from deploy.tensorrt import board_runner, trt_board
from deploy_fixtures import make_plan, tiny_cnn

ALIGN = 256


class FakeCuda:
    """Device pointers from a counter, 256-aligned and apart; copies to the device kept."""

    def __init__(self):
        self.next, self.streams, self.copies = 1 << 20, 0, []

    def malloc(self, nbytes):
        ptr = self.next
        self.next += (-(-max(nbytes, ALIGN) // ALIGN) + 1) * ALIGN
        return ptr

    def h2d(self, dst, arr):
        self.copies.append((dst, np.array(arr)))

    def d2h(self, arr, src):
        arr[...] = src % 1000        # a value that names the device buffer read

    def stream(self):
        self.streams += 1
        return self.streams

    def sync(self, stream):
        pass


class FakeEngine:
    """An engine that records, when called, its model, the addresses bound and its stream."""
    log: list = []

    def __init__(self, runtime, path):
        self.path, self.scratch, self.attached = path, 1000, None

    def attach(self, ptr):
        self.attached = ptr

    def call(self, addresses, stream):
        record = (self.path, dict(addresses), stream, self.attached)
        return lambda: FakeEngine.log.append(record)


@pytest.fixture(scope="module", params=["in-turn", "pipelined"])
def deployed(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("board")
    cnn = tiny_cnn(tmp)
    split = {cnn.name: 4} if request.param == "pipelined" else None
    plan = make_plan([cnn], {cnn.name: all_parts(cnn)}, split=split,
                     pipelined=split is not None, data_bytes=2)
    derive(plan, {cnn.name: cnn}, tmp / "dep", backend="tensorrt")
    return tmp / "dep", json.loads((tmp / "dep" / "manifest.json").read_text())


@pytest.fixture
def board(deployed, monkeypatch):
    folder, _ = deployed
    monkeypatch.setattr(trt_board, "Cuda", FakeCuda)
    monkeypatch.setattr(trt_board, "Engine", FakeEngine)
    monkeypatch.setattr(trt_board, "trt", SimpleNamespace(Runtime=lambda logger: "runtime"))
    monkeypatch.setattr(trt_board, "trt_logger", lambda: None)
    monkeypatch.setattr(FakeEngine, "log", [])
    return trt_board.Board(str(folder), board_runner.load_manifest(str(folder)))


def expected_calls(data, board, parity):
    """(model path, {port: address}) of every model step of the CNN "tiny" in order, from
    the JSON: edges at arena + device_offset + slot * row_bytes, outputs at the sink's
    buffer + slot rows, consts anywhere (their copies are checked apart)."""
    sinks = {o["layer"]: k for k, o in enumerate(data["cnns"]["tiny"]["outputs"])}
    out = []
    for part in data["partitions"]:
        for step in part["steps"]:
            if step["model"] is None:
                continue
            addresses = {}
            for b in step["bind"]:
                if b["kind"] == "edge":
                    e = data["edges"][b["edges"][parity]]
                    addresses[b["name"]] = board.arena + e["device_offset"] + b["slot"] * e["row_bytes"]
                elif b["kind"] == "output":
                    port = data["cnns"]["tiny"]["outputs"][sinks[b["layer"]]]
                    n, c, _, w = port["shape"]
                    row = n * c * w * 2 if port["layout"] == "hncw" else 0
                    ptr = board.cnns["tiny"].outputs[parity][sinks[b["layer"]]][0]
                    addresses[b["name"]] = ptr + b["slot"] * row
                else:
                    addresses[b["name"]] = "const"
            out.append((board.dir + "/engines/" + step["model"][:-len(".onnx")] + ".engine",
                        addresses))
    return out


def test_board_binds_the_manifest_addresses(deployed, board):
    folder, data = deployed
    consts = [b["values"] for p in data["partitions"] for s in p["steps"] for b in s["bind"]
              if b["kind"] == "const"]
    run = board.cnns["tiny"]
    assert run.pipelined == (len(data["partitions"]) == 2)
    assert [st.name for st in run.stages] == [p["name"] for p in data["partitions"]]
    assert board.allocated == data["device_arena_bytes"] + 2 * sum(
        -(-4 * len(v) // ALIGN) * ALIGN for v in consts)
    # consts: copied once per parity, as int32, to buffers of their own
    copied = {dst: arr for dst, arr in board.cuda.copies}
    assert len(copied) == len(board.cuda.copies) == 2 * len(consts)
    assert sorted(a.tolist() for a in copied.values()) == sorted(consts * 2)
    assert all(a.dtype == np.int32 for a in copied.values())
    board.cuda.copies.clear()

    frames = [np.full((1, 3, 8, 8), f, np.float32) for f in range(3)]
    results = board.run_stream("tiny", frames)
    models = sum(1 for p in data["partitions"] for s in p["steps"] if s["model"])
    assert run.calls == 3 * sum(len(p["steps"]) for p in data["partitions"])
    log = FakeEngine.log
    assert len(log) == 3 * models
    by_frame = [log[f * models:(f + 1) * models] for f in range(3)] if not run.pipelined else None
    if run.pipelined:          # each stage's calls in frame order, stages interleaved
        stage_of = {}
        for k, part in enumerate(data["partitions"]):
            stage_of.update({s["model"]: k for s in part["steps"] if s["model"]})
        streams = {r[2] for r in log}
        assert len(streams) == 2 and len({r[3] for r in log}) == 2    # own stream, own scratch
        per_stage = [[r for r in log if r[2] == s] for s in sorted(streams)]
        n0 = len(per_stage[0]) // 3
        by_frame = [per_stage[0][f * n0:(f + 1) * n0] + per_stage[1][f * (models - n0):(f + 1) * (models - n0)]
                    for f in range(3)]
    for f, calls in enumerate(by_frame):
        want = expected_calls(data, board, f % 2)
        assert [path for path, *_ in calls] == [path for path, _ in want]
        for (_, got, *_), (_, addresses) in zip(calls, want):
            assert {k: v for k, v in got.items() if addresses[k] != "const"} == {
                k: v for k, v in addresses.items() if v != "const"}
            assert all(got[k] in copied for k, v in addresses.items() if v == "const")
    # the frame: copied into the input edges of its parity, rows first where hncw
    frame_binds = [b for p in data["partitions"] for s in p["steps"] if s["model"] is None
                   for b in s["bind"]]
    assert frame_binds
    want_copies = []
    for f in range(3):
        for b in frame_binds:
            e = data["edges"][b["edges"][f % 2]]
            arr = frames[f].transpose(2, 0, 1, 3) if e["layout"] == "hncw" else frames[f]
            want_copies.append((board.arena + e["device_offset"], arr.astype(np.float16)))
    assert len(board.cuda.copies) == len(want_copies)
    for (dst, arr), (want_dst, want_arr) in zip(board.cuda.copies, want_copies):
        assert dst == want_dst and arr.dtype == np.float16 and np.array_equal(arr, want_arr)
    # outputs: each CNN output read back from its parity's buffer, NCHW, as float32
    outs = data["cnns"]["tiny"]["outputs"]
    for f, got in enumerate(results):
        assert [list(a.shape) for a in got] == [o["shape"] for o in outs]
        sinks = board.cnns["tiny"].outputs[f % 2]
        assert [float(a.flat[0]) for a in got] == [float(np.float16(ptr % 1000)) for ptr, *_ in sinks]
        assert all(a.dtype == np.float32 for a in got)

"""Session state in the plan's memory (issue 27, item 1; explorer/memory/buffers.session_bytes):
every loaded step model keeps its session, so with a measured profile the plan counts each
layer's model once (a layer by parts whose last part is shorter: two part models), on top of
parameters, buffers and workspace. Figures here are computed from the table in the test."""
from __future__ import annotations

from explorer.memory.buffers import session_bytes
from explorer.plan.derive import derive
from explorer.throughput.device_profile import LayerTimes
from test_deploy_fixtures import make_app, tiny_cnn


def table(cnn) -> dict:
    """Made-up measurements: whole 1000 + 10 i bytes, a part model 5000 + 10 i."""
    out = {}
    for i, name in enumerate(cnn.order()):
        out[name] = LayerTimes(1.0, 0.1, int(cnn.layer(name).output_shape[2]),
                               whole_session_bytes=1000 + 10 * i,
                               part_session_bytes=5000 + 10 * i)
    return out


def test_session_state_is_counted_per_loaded_model(tmp_path):
    cnn = tiny_cnn(tmp_path)
    app = make_app([cnn], split={"tiny": 5}, pipelined=True)     # two partitions, one set
    tables = {"tiny": table(cnn)}
    order = cnn.order()
    # conv1 (16 rows) in 4 parts of 4; dw2 (8 rows) in 3 parts: 3, 3 and a last of 2
    phases = {"tiny": {n: 1 for n in order} | {"conv1": 4, "dw2": 3}}
    i = {n: k for k, n in enumerate(order)}
    expected = sum(1000 + 10 * i[n] for n in order if n not in ("x", "conv1", "dw2"))  # x: Input
    expected += (5000 + 10 * i["conv1"]) + 2 * (5000 + 10 * i["dw2"])
    assert session_bytes(app, phases, tables) == expected
    d = derive(app, phases, None, tables)
    assert d.session_bytes == expected
    assert d.memory_bytes == d.param_bytes + d.buffer_bytes + d.workspace_bytes + expected
    assert session_bytes(app, phases, None) == 0           # no profile: nothing measured

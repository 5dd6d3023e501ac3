"""precision: auto on a measured profile per precision (explorer/throughput/evaluator.py
`at_precision`): a layer is timed, and its workspace and session bytes counted, from the
table measured at its own precision; a layer at a precision no table measured keeps the
base table scaled by the profile's speedup."""
from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.app.layer_precision import LADDER, LayerPrecisions
from explorer.app.model import Partition
from explorer.plan.derive import derive
from explorer.throughput.device_profile import DeviceProfile, LayerTimes
from explorer.throughput.evaluator import Evaluator
from explorer.throughput.runtime_costs import LayerBytes
from test_throughput import _app, _chain


def _table(ms: float, ws: int, session: int) -> dict[str, LayerTimes]:
    """Layers in, l0, l1: l0 takes `ms`, l1 twice it; workspace and session bytes likewise."""
    row = lambda k: LayerTimes(k * ms, bytes=LayerBytes(whole_ws_bytes=k * ws,  # noqa: E731
                                                        whole_session_bytes=k * session))
    return {"in": LayerTimes(0.0), "l0": row(1), "l1": row(2)}


@pytest.fixture
def evaluator():
    cnn = _chain("a", 2)
    app = replace(_app([cnn], [Partition("p", "a", cnn.order())], [["p"]], platform="cpu"),
                  precisions=LADDER)
    fp32 = DeviceProfile("cpu", models={"a": _table(4.0, 4000, 400)}, speedup={"fp16": 2.0})
    int8 = DeviceProfile("cpu", models={"a": _table(1.0, 9000, 900)})
    return app, Evaluator(app, fp32, "cpu", {"int8": int8})


def test_each_layer_timed_from_its_precisions_table(evaluator):
    app, ev = evaluator
    mix = LayerPrecisions.of({"a": {"l0": "int8", "l1": "fp16"}})
    # l0 measured at int8 (1 ms); l1 has no fp16 table: fp32's 8 ms over the speedup 2
    assert ev.frame_ms(None, mix)["a"] == pytest.approx(1.0 + 8.0 / 2.0)
    assert ev.frame_ms(None, None)["a"] == pytest.approx(4.0 + 8.0)


def test_workspace_and_sessions_from_each_layers_precision(evaluator):
    app, ev = evaluator
    mix = LayerPrecisions.of({"a": {"l0": "int8", "l1": "fp32"}})
    rows = ev.tables_for(mix)["a"]
    assert rows["l0"].bytes.whole_ws_bytes == 9000 and rows["l1"].bytes.whole_ws_bytes == 8000
    phases = {"a": {l: 1 for l in app.cnns["a"].order()}}
    d = derive(app, phases, workspace=dict(ev.tables_for(mix)), layers=mix)
    base = derive(app, phases, workspace=dict(ev.tables), layers=mix)
    # the largest step's workspace: int8 l0's 9000 against fp32 l0's 4000 (l1 8000), beside
    # the same fp32 copies at precision boundaries in both
    assert d.workspace_bytes - base.workspace_bytes == 9000 - 8000
    assert d.session_bytes - base.session_bytes == 900 - 400

"""Which models hold a layer's weights (deploy/ort/weight_holders.py): the models that pre-pack
(theirs alone) and the models that run plain so that no layer's weights are held both
NCHWc-reordered and plain."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from deploy.ort.process import form_options, init_runtime
from deploy.ort.weight_holders import NCHWC, one_form_per_layer, sole_models, weightless_state
from deploy.runtime.footprint import HeapMeter, trim_heap
from deploy.runtime.step_records import Step


class _Manifest:
    def __init__(self, steps):
        self._steps = steps

    def steps(self):
        return [(None, None, s) for s in self._steps]


def _step(layer, model, region=None):
    return Step(layer, 0, model, (), region=region)


STEPS = [
    _step("input", None),                                   # the frame copy: no model
    _step("a", "a.whole.onnx"),                             # a layer in one model
    _step("b", "b.first.onnx"), _step("b", "b.rest.onnx"),  # a layer in two part models
    _step("c", "c.region.onnx", region=(("c", 0), ("d", 0))),   # a band of c and d
    _step("d", "d.part.onnx"),                              # d's later rows by parts
    _step("e", "e.part.onnx"),
    _step("c", "c.tail.onnx"),                              # c's last rows alone
]


def _graph(kind):
    domain = NCHWC if kind == "nchwc" else ""
    node = helper.make_node("Conv", ["x", "w"], ["y"], domain=domain)
    return helper.make_model(helper.make_graph([node], "g", [], []))


def test_sole_models_are_the_only_holders_of_their_layers():
    root = Path("/deploy")
    assert sole_models(_Manifest(STEPS), root) == {str(root / "a.whole.onnx"), str(root / "e.part.onnx")}


def test_one_form_per_layer():
    forms = {"a.whole.onnx": "nchwc", "b.first.onnx": "nchwc", "b.rest.onnx": "plain",
             "c.region.onnx": "nchwc", "d.part.onnx": "plain", "e.part.onnx": "plain",
             "c.tail.onnx": "nchwc"}
    plain = one_form_per_layer(_Manifest(STEPS), {m: _graph(k) for m, k in forms.items()})
    # b is mixed; d is mixed (region nchwc, its part plain), which makes the region plain,
    # and then c (region plain, tail nchwc) mixed: its tail runs plain too
    assert plain == {"b.first.onnx", "b.rest.onnx", "c.region.onnx", "d.part.onnx", "c.tail.onnx"}
    uniform = {m: "nchwc" for m in forms}
    assert one_form_per_layer(_Manifest(STEPS), {m: _graph(k) for m, k in uniform.items()}) == set()


def test_weightless_state_leaves_the_weights_out(tmp_path):
    """A pre-packing session's state is measured on a build holding none of its weights: a
    4 MiB weight handed in adds nothing, while the same model holding it grows the heap by
    at least its bytes (so the measure would see it)."""
    heap = HeapMeter()
    if heap.in_use() is None:
        pytest.skip("glibc's mallinfo2 is needed to count heap bytes")
    init_runtime(1)                 # ONNX Runtime's one-time set-up, as before any step session
    w = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    onnx.save(model, str(tmp_path / "m.onnx"), save_as_external_data=True, location="m.bin",
              size_threshold=0)
    by_reference = onnx.load(str(tmp_path / "m.onnx"), load_external_data=False)
    state = weightless_state(by_reference, tmp_path / "probe.onnx", {"w": w},
                             form_options(1, False), heap)
    assert 0 < state < w.nbytes // 4, state
    assert not (tmp_path / "probe.onnx").exists()
    trim_heap()
    before = heap.in_use()
    holding = ort.InferenceSession(str(tmp_path / "m.onnx"), form_options(1, False),
                                   providers=["CPUExecutionProvider"])
    assert heap.in_use() - before >= w.nbytes
    del holding

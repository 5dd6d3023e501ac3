"""`explore deploy`'s step check binds each model to zero arrays of its ports and runs it
once (deploy/checks/step_models.py `check_model`): a model ONNX Runtime loads but cannot
run is refused at deploy, as is one without outputs."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from deploy.checks.step_models import check_model


def _save(path, nodes, outputs, inits=()):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 4])], outputs,
                         list(inits))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("index, refused", [(1, None), (-2, None), (2, "bound and run once"),
                                            (5, "bound and run once")])
def test_a_model_that_loads_but_fails_its_first_call_is_refused(tmp_path, index, refused):
    path = _save(tmp_path / "g.onnx", [h.make_node("Gather", ["x", "i"], ["y"], axis=0)],
                 [h.make_tensor_value_info("y", T.FLOAT, [1, 4])],
                 [nh.from_array(np.array([index], np.int64), "i")])
    why = check_model(path)
    if refused is None:
        assert why is None
    else:
        assert refused in why and "out of data bounds" in why


def test_a_model_without_output_is_refused(tmp_path):
    path = _save(tmp_path / "g.onnx", [h.make_node("Relu", ["x"], ["y"])], [])
    assert "no output" in check_model(path)

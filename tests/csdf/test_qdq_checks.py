"""A QDQ model's scales and zero points checked at import (csdf/qdq_checks.py): a table of
values against the ONNX operators' rules, one line naming the node and tensor, exit 2; and a
legal but extreme activation scale (1e-30) deployed and run to PASS (deploy/quant/bias_range.py)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest
from onnx import numpy_helper as nh

from csdf.onnx_import import load_onnx
from sdf3.errors import InputError
from test_onnx_qdq import Frames, fp32_model

quantization = pytest.importorskip("onnxruntime.quantization")


@pytest.fixture(scope="module")
def qdq(tmp_path_factory):
    """The test net quantized by ONNX Runtime's quantize_static, weights per channel."""
    folder = tmp_path_factory.mktemp("qdq_checks")
    fp32_model(folder / "f.onnx")
    quantization.quantize_static(str(folder / "f.onnx"), str(folder / "q.onnx"), Frames(),
                                 quant_format=quantization.QuantFormat.QDQ, per_channel=True)
    return folder / "q.onnx"


def _edited(source, target, **changes):
    """`source` with initializers replaced: name -> function of the old array (returning
    the new array, its type kept unless the function returns another)."""
    model = onnx.load(str(source))
    for i, t in enumerate(model.graph.initializer):
        if t.name in changes:
            model.graph.initializer[i].CopyFrom(nh.from_array(changes[t.name](nh.to_array(t)), t.name))
    onnx.save(model, str(target))
    return target


def _set(value):
    return lambda a: np.full(a.shape, value, a.dtype)


def _first(value):
    def change(a):
        a = a.copy()
        a.reshape(-1)[0] = value
        return a
    return change


CASES = [   # (initializer edits, words of the refusal, or None: imports)
    ({"input_scale": _set(np.inf)}, "of tensor 'input': scale inf; a scale must be finite and > 0"),
    ({"input_scale": _set(np.nan)}, "scale nan"),
    ({"input_scale": _set(0.0)}, "scale 0;"),
    ({"r1_scale": _set(-1.0)}, "of tensor 'r1': scale -1;"),
    ({"conv1.w_scale": _first(0.0)}, "of tensor 'conv1.w_quantized': scale 0;"),
    ({"conv1.w_scale": _first(-np.inf)}, "scale -inf"),
    ({"conv1.w_scale": lambda a: a[:-1]}, "7 scales but 8 zero points"),
    ({"conv1.w_scale": lambda a: a[:-1], "conv1.w_zero_point": lambda a: a[:-1]},
     "7 scales along axis 0, which has 8 elements"),
    ({"conv1.w_scale": lambda a: np.concatenate([a, a]),
      "conv1.w_zero_point": lambda a: np.concatenate([a, a])}, "16 scales along axis 0"),
    ({"input_zero_point": lambda a: np.full(a.shape, 300, np.int16)}, "quantized to int16"),
    ({"conv1.w_zero_point": lambda a: np.full(a.shape, 300, np.int32)},
     "zero point of type int32, the tensor is int8"),
    ({"input_scale": _set(1e-30)}, None),
    ({"input_scale": _set(1e30), "input_zero_point": _set(-128)}, None),
    ({}, None),
]


@pytest.mark.parametrize("changes, words", CASES, ids=[str(i) for i in range(len(CASES))])
def test_scales_and_zero_points_at_import(qdq, tmp_path, changes, words):
    path = _edited(qdq, tmp_path / "e.onnx", **changes)
    if words is None:
        assert load_onnx(path, "net").quantized is not None
        return
    with pytest.raises(InputError) as err:
        load_onnx(path, "net")
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{path}: ") and words in line, line


def test_an_extreme_activation_scale_deploys_and_passes(qdq, tmp_path, capsys):
    """Scales 1e-30 on the input and on r1 (conv1's Relu): the biases of conv1 and dw2 would
    be ~1e31 in the int32 of ONNX Runtime's fused kernels, so those steps add their bias
    apart (computed in fp32, as the QDQ model means) and the deployment PASSes against the
    QDQ model itself."""
    from deploy.build.derive import derive
    from deploy.build.quantization import deployment_scales
    from deploy_fixtures import make_plan
    from explorer.cli.main import main
    path = _edited(qdq, tmp_path / "tiny.onnx", input_scale=_set(1e-30), r1_scale=_set(1e-30))
    cnn = load_onnx(path, "net")
    out = tmp_path / "dep"
    shutil.rmtree(out, ignore_errors=True)
    manifest = derive(make_plan([cnn], {"net": {k: 1 for k in cnn.order()}}, data_bytes=1),
                      {"net": cnn}, out, scales=deployment_scales({"net": cnn}, None),
                      regions=False)
    apart = {m.layer for rel, m in manifest.models.items()
             if any(t.name.endswith(":B:apart") for t in onnx.load(str(out / rel)).graph.initializer)}
    assert apart == {"conv1", "dw2"}
    capsys.readouterr()
    assert main(["run", str(out), "--frames", "2", "--json", "--in-process", "--threads", "1"]) == 0
    v = json.loads(capsys.readouterr().out)["verdict"]["net"]
    assert v["verdict"] == "PASS" and v["max_abs_output"] > 0.1, v

"""ShuffleNetV2's channel shuffle by parts of every size, at opsets 13, 17 and 18.

The TorchScript exporter (opsets 13 and 17 alike in torchvision's real files) writes the
shuffle's view shapes as int64 Constant nodes baked for the whole height; the dynamo
exporter (opset 18) as int64 initializers. A per-pixel opaque layer's part model must
compute exactly the rows of its part, so every such shape is rewritten for the part's
height (deploy/steps/opaque.py); before, a part of several rows computed a tensor of the
whole height's shape ("Got invalid dimensions for output ... Got: 4 Expected: 1").

Each case: built with onnx.helper, imported, deployed with the opaque layers (and the
convolutions) by parts of k rows for several k (parts that divide the height and parts
with a shorter last one), run, and compared with ONNX Runtime on the original file;
arena bytes equal the plan's."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts
from onnx_cases import Net
from test_real_patterns import phases_diff

H, W = 10, 6
OPSETS = [13, 17, 18]
# opsets 13 and 17 write the same nodes (Split with a split input, shapes as Constant nodes or
# initializers) and take the same branches of the import and the step models (opset >= 13,
# below 18); the slower cases deploy six part sizes each, so they run at 17 and 18 only
# (13 stays in test_back_to_back_shuffles and test_real_patterns)
SLOW_OPSETS = [17, 18]


def _shape(n: Net, value: list[int], style: str) -> str:
    if style == "constant":                    # TorchScript: a Constant node
        return n.const(value, np.int64)
    n.k += 1                                   # dynamo: an initializer named val_<k>
    return n.init(f"val_{n.k}", value, np.int64)


def _shuffle(n: Net, x: str, c: int, style: str, tag: str) -> str:
    """x.view(1, 2, c/2, H, W).transpose(1, 2).reshape(1, -1, H, W)."""
    r = n.op("Reshape", [x, _shape(n, [1, 2, c // 2, H, W], style)], name=f"/{tag}/Reshape")
    t = n.op("Transpose", [r], perm=[0, 2, 1, 3, 4], name=f"/{tag}/Transpose")
    return n.op("Reshape", [t, _shape(n, [1, -1, H, W], style)], name=f"/{tag}/Reshape_1")


def shuffle_unit_net(path: Path, opset: int, style: str) -> Path:
    """conv 3 -> 8, then two ShuffleNetV2 stride-1 units (chunk: Split; branch: 1x1 conv,
    3x3 depthwise, 1x1 conv; Concat; shuffle), then a 3x3 conv reading neighbour rows."""
    n = Net(29)
    x = n.op("Relu", [n.conv("input", 3, 8)])
    for u in range(2):
        a, b = (f"/unit{u}/split_{i}" for i in range(2))
        if opset >= 18:
            n.nodes.append(helper.make_node("Split", [x], [a, b], axis=1, num_outputs=2,
                                            name=f"/unit{u}/Split"))
        else:
            n.nodes.append(helper.make_node("Split", [x, _shape(n, [4, 4], style)], [a, b], axis=1,
                                            name=f"/unit{u}/Split"))
        y = n.op("Relu", [n.conv(b, 4, 4, k=1)])
        y = n.conv(y, 4, 4, group=4)
        y = n.op("Relu", [n.conv(y, 4, 4, k=1)])
        cat = n.op("Concat", [a, y], axis=1, name=f"/unit{u}/Concat")
        x = _shuffle(n, cat, 8, style, f"unit{u}")
    n.conv(x, 8, 8)
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, H, W])], [("output", [1, 8, H, W])], opset=opset)


def shuffle_only_net(path: Path, opset: int, style: str) -> Path:
    """conv -> shuffle -> shuffle (two opaque layers back to back, or one) -> 3x3 conv."""
    n = Net(17)
    x = n.op("Relu", [n.conv("input", 3, 8)])
    x = _shuffle(n, _shuffle(n, x, 8, style, "s0"), 8, style, "s1")
    n.conv(x, 8, 8)
    n.nodes[-1].output[0] = "output"
    return n.save(path, [("input", [1, 3, H, W])], [("output", [1, 8, H, W])], opset=opset)


def phases_for(cnn, rows: int, only_opaque: bool = False, others: int | None = None) -> dict:
    """Every layer that can go by parts in parts of `rows` rows (the opaque ones only, or
    the others in parts of `others` rows); the rest whole."""
    can = all_parts(cnn)
    out = {}
    for name in cnn.order():
        layer = cnn.layer(name)
        h = int(layer.output_shape[2])
        k = rows if layer.op == "Opaque" else (others if others is not None else rows)
        out[name] = math.ceil(h / k) if can.get(name, 1) > 1 and k and not (
            only_opaque and layer.op != "Opaque") else 1
    return out


def deployed_rel_diff(cnn, tmp_path: Path, phases: dict) -> float:
    return phases_diff(cnn, tmp_path / "dep", phases, (0.1, 100))


def _opaque(cnn) -> list[str]:
    names = [n for n in cnn.order() if cnn.layer(n).op == "Opaque"]
    assert names and all(cnn.layer(n).hyper["per_pixel"] for n in names), names
    return names


@pytest.mark.parametrize("style", ["constant", "initializer"])
@pytest.mark.parametrize("opset", SLOW_OPSETS)
def test_shuffle_units_by_parts_of_every_size(tmp_path, opset, style):
    cnn = load_onnx(shuffle_unit_net(tmp_path / "u.onnx", opset, style), "u")
    opaque = _opaque(cnn)
    for rows in (1, 2, 3, 4, 5, 7):
        phases = phases_for(cnn, rows)
        assert all(phases[n] == math.ceil(H / rows) for n in opaque)
        assert deployed_rel_diff(cnn, tmp_path, phases) < 1e-5, rows


@pytest.mark.parametrize("opset", SLOW_OPSETS)
def test_opaque_parts_beside_other_part_sizes(tmp_path, opset):
    """The shuffles in parts of k rows, the convolutions whole or in parts of other sizes."""
    cnn = load_onnx(shuffle_unit_net(tmp_path / "u.onnx", opset, "constant"), "u")
    for rows, others in ((3, None), (4, 1), (2, 5), (5, 3)):
        phases = phases_for(cnn, rows, only_opaque=others is None, others=others)
        assert deployed_rel_diff(cnn, tmp_path, phases) < 1e-5, (rows, others)


@pytest.mark.parametrize("style", ["constant", "initializer"])
@pytest.mark.parametrize("opset", OPSETS)
def test_back_to_back_shuffles(tmp_path, opset, style):
    cnn = load_onnx(shuffle_only_net(tmp_path / "s.onnx", opset, style), "s")
    _opaque(cnn)
    for rows in (1, 3, 4, 10):
        assert deployed_rel_diff(cnn, tmp_path, phases_for(cnn, rows)) < 1e-5, rows

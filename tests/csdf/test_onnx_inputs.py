"""Dynamic graph-input dimensions (csdf/onnx_inputs.py): an export with dynamic height and
width is refused in one line until the app file's input_shape fixes it, and then gives the
static export's figures; a dynamic batch becomes 1 and `explore info` says so."""
from __future__ import annotations

import json

import onnx
import pytest
import yaml

from csdf.onnx_import import load_onnx
from explorer.cli.main import main
from onnx_cases import Net
from sdf3.errors import InputError

STATIC = [1, 3, 12, 10]


def small_net(path, shape):
    """Conv(3->8, 3x3) + Relu, Conv(8->4, stride 2): input and output dims as `shape` says
    (numbers, or names for dynamic ones)."""
    n = Net(3)
    x = n.op("Relu", [n.conv("input", 3, 8)])
    n.conv(x, 8, 4, strides=[2, 2])
    n.nodes[-1].output[0] = "output"
    out = [shape[0], 4, None, None]
    return n.save(path, [("input", shape)], [("output", out)])


def _app(tmp_path, model, **entry):
    app = tmp_path / "app.yaml"
    app.write_text(yaml.safe_dump({"cnns": [{"name": "net", "model": model.name, **entry}]}))
    return str(app)


def _info(capsys, app):
    code = main(["info", app, "--json"])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else None), out.err


def expected_elements(h, w):
    """Edges of the model by hand: input -> conv1 (+relu) 3HW, conv1 -> conv2 8HW (conv2's
    output leaves the CNN: no edge)."""
    return 3 * h * w + 8 * h * w


def test_dynamic_height_width_refused_in_one_line(tmp_path, capsys):
    model = small_net(tmp_path / "m.onnx", ["N", 3, "H", "W"])
    code, _, err = _info(capsys, _app(tmp_path, model))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "graph input 'input' dimension 2 ('H') is dynamic" in lines[0]
    assert "cnns[0].input_shape" in lines[0]


def test_input_shape_gives_the_static_figures(tmp_path, capsys):
    static = small_net(tmp_path / "s.onnx", STATIC)
    dynamic = small_net(tmp_path / "d.onnx", ["N", 3, "H", "W"])
    code, want, _ = _info(capsys, _app(tmp_path, static))
    assert code == 0
    code, got, _ = _info(capsys, _app(tmp_path, dynamic, input_shape=STATIC))
    assert code == 0
    a, b = want["cnns"]["net"], got["cnns"]["net"]
    assert b["edge_elements"] == a["edge_elements"]
    assert b["input_shapes"] == {"input": STATIC} and b["batch_fixed"] == []
    cnn_s, cnn_d = load_onnx(static, "s"), load_onnx(dynamic, "d", input_shape={"input": STATIC})
    assert [cnn_d.layer(n).output_shape for n in cnn_d.order()] == \
           [cnn_s.layer(n).output_shape for n in cnn_s.order()]
    assert cnn_d.layer(cnn_d.order()[-1]).output_shape == (1, 4, 6, 5)


def test_other_sizes_scale_the_figures(tmp_path, capsys):
    dynamic = small_net(tmp_path / "d.onnx", ["N", 3, "H", "W"])
    for h, w in ((12, 10), (32, 20)):
        code, got, _ = _info(capsys, _app(tmp_path, dynamic, input_shape=[1, 3, h, w]))
        assert code == 0
        assert got["cnns"]["net"]["edge_elements"] == expected_elements(h, w)


def test_dynamic_batch_becomes_one_and_info_says_so(tmp_path, capsys):
    static = small_net(tmp_path / "s.onnx", STATIC)
    dynamic = small_net(tmp_path / "b.onnx", ["batch", 3, 12, 10])
    _, want, _ = _info(capsys, _app(tmp_path, static))
    code, got, _ = _info(capsys, _app(tmp_path, dynamic))
    assert code == 0
    assert got["cnns"]["net"]["batch_fixed"] == ["input"]
    assert got["cnns"]["net"]["edge_elements"] == want["cnns"]["net"]["edge_elements"]
    assert main(["info", _app(tmp_path, dynamic)]) == 0
    text = capsys.readouterr().out
    assert "graph input 'input' has a dynamic batch dimension: taken as 1" in text
    assert main(["info", _app(tmp_path, static)]) == 0
    assert "dynamic batch" not in capsys.readouterr().out


@pytest.mark.parametrize("shape, words", [
    ([1, 3, 12], "has 4 dimensions, cnns[0].input_shape gives 3"),
    ([1, 4, 12, 10], "dimension 1 is 3 in the model, cnns[0].input_shape gives 4"),
    ([1, 3, 0, 10], "expected a list of positive integers"),
    ({"image": [1, 3, 12, 10]}, "unknown graph input 'image'; expected one of input"),
    ("1x3x12x10", "expected [N, C, H, W] or a mapping"),
])
def test_bad_input_shape_refused(tmp_path, capsys, shape, words):
    dynamic = small_net(tmp_path / "d.onnx", ["N", 3, "H", "W"])
    code, _, err = _info(capsys, _app(tmp_path, dynamic, input_shape=shape))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert words in err, err


def test_input_shape_with_synthetic_refused(tmp_path):
    from explorer.app.appfile import load_app
    app = tmp_path / "app.yaml"
    app.write_text(yaml.safe_dump({"cnns": [{"name": "s", "model": {"synthetic": {"layers": 3}},
                                             "input_shape": [1, 3, 8, 8]}]}))
    with pytest.raises(InputError, match=r"cnns\[0\]\.input_shape: expected only with an ONNX model"):
        load_app(app)


def test_fix_inputs_leaves_a_static_model_unchanged(tmp_path):
    from csdf.onnx_inputs import fix_inputs
    model = onnx.load(str(small_net(tmp_path / "s.onnx", STATIC)))
    before = model.SerializeToString()
    fixed = fix_inputs(model, "s.onnx")
    assert fixed.shapes == (("input", tuple(STATIC)),) and fixed.batch_fixed == ()
    assert model.SerializeToString() == before

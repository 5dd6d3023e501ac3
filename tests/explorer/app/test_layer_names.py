"""Layer names in app files: the documented rule, ONNX node names accepted as written, the
graph input joining the first partition, and `explore info --layers` printing names whole."""
from __future__ import annotations

import pytest

from csdf.node_names import clean_name, layer_name
from explorer.app.appfile import load_app
from explorer.cli.main import main
from onnx_cases import Net

LONG = "/features/features.12/conv/conv.0/conv.0.2/" + "very_long_module_name_" * 5 + "Relu"


def exported(tmp_path):
    """Three convs named as torch.onnx names nodes; the last has a very long name."""
    n = Net(30)
    x = n.op("Relu", [n.conv("input.1", 3, 4, name="/features/features.0/Conv")], name="/features/features.0/Relu")
    y = n.conv(x, 4, 4, name="/features/features.1/Conv")
    n.op("Relu", [n.conv(y, 4, 4, name=LONG.replace("Relu", "Conv"))], name=LONG)
    n.nodes[-1].output[0] = "output"
    return n.save(tmp_path / "e.onnx", [("input.1", [1, 3, 6, 6])], [("output", [1, 4, 6, 6])])


def app(tmp_path, partitions: str) -> str:
    exported(tmp_path)
    path = tmp_path / "app.yaml"
    path.write_text(f"name: e\ncnns:\n  - name: net\n    model: e.onnx\n    partitions:\n{partitions}")
    return str(path)


def test_the_documented_rule():
    # runs of characters outside [A-Za-z0-9_] become one "_", leading/trailing "_" go
    assert clean_name("/features/features.0/Conv") == "features_features_0_Conv"
    assert clean_name("input.1") == "input_1" and clean_name("a..b//c_") == "a_b_c"
    assert layer_name("///") == "layer"


def test_graph_input_joins_the_first_partition(tmp_path):
    named = load_app(app(tmp_path, "      - {name: head, layers: [input_1, features_features_1_Conv]}\n"
                                   "      - {name: tail, layers: [" + clean_name(LONG.replace("Relu", "Conv")) + "]}\n"))
    omitted = load_app(app(tmp_path, "      - {name: head, layers: [features_features_0_Conv, "
                                     "features_features_1_Conv]}\n      - {name: tail, layers: ["
                                     + clean_name(LONG.replace("Relu", "Conv")) + "]}\n"))
    assert [p.layers for p in omitted.partitions] == [p.layers for p in named.partitions]
    assert omitted.partitions[0].layers[0] == "input_1"


def test_onnx_node_names_accepted(tmp_path):
    """Partitions may name layers by their ONNX node names as exported, including a node
    fused into its layer (the Relu after the first Conv)."""
    a = load_app(app(tmp_path, "      - {name: head, layers: [input.1, /features/features.0/Relu]}\n"
                               f"      - {{name: tail, layers: [/features/features.1/Conv, '{LONG}']}}\n"))
    assert [p.layers for p in a.partitions] == [["input_1", "features_features_0_Conv"],
                                               ["features_features_1_Conv", clean_name(LONG.replace("Relu", "Conv"))]]
    with pytest.raises(Exception, match=r"layer 'features\.1' is not in model net"):
        load_app(app(tmp_path, "      - {name: all, layers: [input.1, features.1]}\n"))


def test_info_layers_prints_names_whole(tmp_path, capsys):
    path = app(tmp_path, "      - {name: all, layers: [input_1, /features/features.1/Conv]}\n"
                         f"      - {{name: tail, layers: ['{LONG}']}}\n")
    assert main(["info", path, "--layers"]) == 0
    out = capsys.readouterr().out
    assert clean_name(LONG.replace("Relu", "Conv")) in out    # 150 characters, on one line

"""torch.onnx's default (dynamo) exporter as a first-class source: its node and
tensor naming, opset 18 LayerNormalization, Linear as MatMul + Add with `val_<n>`
initializers, `select` as a Gather with a 0-d index, built with onnx.helper as it writes
them (tests/onnx_cases.dynamo_block), imported as one per-pixel layer and deployed whole and
by parts of several sizes with outputs equal to ONNX Runtime on the file."""
from __future__ import annotations

import json

import onnx
from onnx import numpy_helper as nh

from csdf.onnx_import import load_onnx
from csdf.parts import can_split
from onnx_cases import dynamo_block
from test_real_patterns import deployed_diff, inits


def test_dynamo_block_imports_as_one_per_pixel_layer(tmp_path):
    path = dynamo_block(tmp_path / "d.onnx")
    cnn = load_onnx(path, "d")
    assert [cnn.layer(n).op for n in cnn.order()] == ["Input", "Conv", "Opaque", "Add"]
    assert cnn.order()[1:] == ["node_Conv_0", "node_permute_1", "node_add_2"]   # ONNX node names
    block = cnn.layer("node_permute_1")
    assert block.hyper["per_pixel"] and can_split(block)
    assert block.hyper["onnx_ops"][:3] == ["Transpose", "LayerNormalization", "Reshape"]
    w = inits(path)
    weights = ["block.norm.weight", "block.norm.bias", "val_1", "block.fc.bias"]
    assert block.param_count == sum(w[k].size for k in weights)
    assert cnn.layer("node_Conv_0").param_count == w["stem.weight"].size + w["stem.weight_bias"].size


def test_dynamo_block_deploys_whole_and_by_parts(tmp_path):
    cnn = load_onnx(dynamo_block(tmp_path / "d.onnx"), "d")
    for parts in (False, True, 2, 3):
        assert deployed_diff(cnn, tmp_path, parts) < 1e-5, parts
    manifest = json.loads((tmp_path / "parts" / "manifest.json").read_text())
    block = next(rel for rel, m in manifest["models"].items() if m["layer"] == "node_permute_1")
    zero_d = [t.name for t in onnx.load(str(tmp_path / "parts" / block)).graph.initializer
              if not t.dims and nh.to_array(t).dtype.kind == "i"]
    assert len(zero_d) == 2          # the two select indices stayed 0-d

"""The TASO-style small networks (csdf/zoo/small.py) are zoo models an app file names as
`zoo:NAME`, and their imported layers are the architectures the docstrings describe."""
from __future__ import annotations

import pytest

from csdf import zoo
from explorer.app.appfile import load_app

# Conv layers per network, counted from the architectures: VGG-11's 8 convs; ResNet-18's
# stem + 8 blocks x 2 + 3 projections; GoogLeNet's stem (1 + reduce + 3x3) + 4 Inception
# modules x 6; SqueezeNet 1.1's conv1 + 8 Fire modules x 3 + conv10.
CONVS = {"vgg_small": 8, "resnet_small": 1 + 16 + 3, "googlenet_small": 3 + 4 * 6,
         "squeezenet_small": 1 + 8 * 3 + 1}


@pytest.mark.parametrize("name", zoo.SMALL)
def test_small_net_loads_from_an_app_file(name, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMTRADE_CACHE", str(tmp_path / "cache"))
    app = tmp_path / "app.yaml"
    app.write_text(f"name: t\nprecision: fp32\ncnns:\n  - name: net\n    model: zoo:{name}\n")
    cnn = load_app(str(app)).cnns["net"]
    layers = [cnn.layer(n) for n in cnn.order()]
    assert sum(layer.op == "Conv" for layer in layers) == CONVS[name]
    assert [layer.output_shape for layer in layers if layer.op == "Input"] == [(1, 3, 112, 112)]
    sinks = [n for n in cnn.order() if cnn.graph.out_degree(n) == 0]
    assert [tuple(cnn.layer(n).output_shape)[:2] for n in sinks] == [(1, 100)]
    if name == "vgg_small":     # the 3x3 weights of 3->32->64->128->128->256->256 x 3
        chans = [3, 32, 64, 128, 128, 256, 256, 256, 256]
        want = sum(a * b * 9 for a, b in zip(chans, chans[1:]))
        assert sum(layer.params["W"].size for layer in layers if layer.op == "Conv") == want

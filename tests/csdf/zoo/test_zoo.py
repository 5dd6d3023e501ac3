"""The built-in zoo: published parameter counts, valid opset-13 ONNX, ONNX Runtime inference, cache."""
from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import csdf.zoo as zoo
from sdf3.errors import InputError

# Published parameter counts (millions) and the tolerance each must meet. Sources in docs/zoo.md.
PUBLISHED = {
    "mobilenet_v2": (3.50e6, 0.01),  # Sandler et al. 2018, Table 5 / Keras
    "mobilenet_v1": (4.23e6, 0.01),  # Keras applications (trainable); the paper's 4.2M
    "mobilenet_v1_025": (0.47e6, 0.01),  # TF-slim MobileNet_v1_0.25_224 table
    "resnet50": (25.56e6, 0.01),  # torchvision / Keras docs, 25.6M
    "efficientnet_b0": (5.29e6, 0.01),  # Tan & Le 2019 report 5.3M; torchvision 5.29M
    "inception_v2": (11.2e6, 0.03),  # TF-slim inception_v2 checkpoint, about 11.2M
    "densenet121": (7.98e6, 0.01),  # torchvision 7.98M (Huang et al. ~8.0M)
    "densenet121_tv": (7.98e6, 0.01),  # the same network, torchvision's Concats
}
CLASSES = {name: 1001 if name == "inception_v2" else 1000 for name in zoo.NAMES}
# channels of the last feature map before global pooling, from each paper's architecture table
LAST_FEATURES = {"mobilenet_v2": 1280, "mobilenet_v1": 1024, "mobilenet_v1_025": 256, "resnet50": 2048,
                 "efficientnet_b0": 1280, "inception_v2": 1024, "densenet121": 1024,
                 "densenet121_tv": 1024}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("zoo")


@pytest.fixture(scope="module")
def models(cache):
    return {name: onnx.load(str(zoo.model_path(name, cache))) for name in zoo.NAMES}


def count_params(model: onnx.ModelProto) -> int:
    """Conv/Gemm weights and biases + BN gamma and beta (not the running mean/var)."""
    sizes = {t.name: int(np.prod(t.dims)) for t in model.graph.initializer}
    total = 0
    for node in model.graph.node:
        if node.op_type in ("Conv", "Gemm"):
            total += sum(sizes[i] for i in node.input[1:])
        elif node.op_type == "BatchNormalization":
            total += sizes[node.input[1]] + sizes[node.input[2]]
    return total


def test_names_are_the_issue_list():
    assert zoo.NAMES == ("mobilenet_v2", "mobilenet_v1", "mobilenet_v1_025", "resnet50",
                         "efficientnet_b0", "inception_v2", "densenet121", "densenet121_tv")


def test_densenet_in_torchvision_form_is_the_same_function_with_every_input_concatenated(models):
    """The same initializers byte for byte and the same output as densenet121, while
    each dense layer j >= 2 of a block reads a Concat of the block input and its j - 1
    predecessors, and the block's end one of all L + 1 (block 3's: 25 inputs)."""
    a, b = models["densenet121"], models["densenet121_tv"]
    assert {t.name: t.raw_data for t in a.graph.initializer} == \
        {t.name: t.raw_data for t in b.graph.initializer}
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    run = [ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
           .run(None, {m.graph.input[0].name: x})[0] for m in (a, b)]
    np.testing.assert_array_equal(run[0], run[1])
    widths = sorted(len(n.input) for n in b.graph.node if n.op_type == "Concat")
    blocks = (6, 12, 24, 16)
    assert widths == sorted([j for n in blocks for j in range(2, n + 1)] + [n + 1 for n in blocks])


@pytest.mark.parametrize("name", zoo.NAMES)
def test_parameter_count_matches_published(models, name):
    published, tolerance = PUBLISHED[name]
    count = count_params(models[name])
    assert abs(count - published) / published <= tolerance, (name, count)


@pytest.mark.parametrize("name", zoo.NAMES)
def test_valid_opset13_onnx_with_strict_shapes(models, name):
    model = models[name]
    assert model.ir_version == 7
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 13)]
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)}
    assert [i.name for i in model.graph.input] == ["input"]
    assert shapes["input"] == [1, 3, 224, 224]
    assert shapes[model.graph.output[0].name] == [1, CLASSES[name]]
    assert model.graph.node[-1].op_type == "Softmax"
    # the map entering the classifier: 7x7 at 224 (stride 32) with the paper's channel count
    pool = next(n for n in model.graph.node if n.op_type == "GlobalAveragePool" and n.name == "pool")
    assert shapes[pool.input[0]] == [1, LAST_FEATURES[name], 7, 7]
    ops = {n.op_type for n in model.graph.node}
    assert {"Conv", "BatchNormalization", "Gemm", "Softmax"} <= ops
    assert not ops & {"HardSwish", "HardSigmoid"}  # opset 14 / not in the originals
    assert all(t.raw_data for t in model.graph.initializer)  # weights stored as raw data


def test_family_specific_ops(models):
    ops = {name: {n.op_type for n in m.graph.node} for name, m in models.items()}
    assert "Clip" in ops["mobilenet_v2"] and "Relu" not in ops["mobilenet_v2"]
    # ReLU6: Clip-13 takes its bounds as scalar (0-d) inputs
    inits = {t.name: numpy_helper.to_array(t) for t in models["mobilenet_v2"].graph.initializer}
    for node in (n for n in models["mobilenet_v2"].graph.node if n.op_type == "Clip"):
        low, high = inits[node.input[1]], inits[node.input[2]]
        assert low.shape == () and high.shape == () and (float(low), float(high)) == (0.0, 6.0)
    assert {"Sigmoid", "Mul", "Add"} <= ops["efficientnet_b0"]
    assert {"Concat", "AveragePool", "MaxPool"} <= ops["inception_v2"]
    assert {"Concat", "AveragePool"} <= ops["densenet121"]
    assert {"Add", "MaxPool", "Relu"} <= ops["resnet50"]
    # depthwise convs: group equals input channels
    dw = [n for n in models["mobilenet_v1"].graph.node if n.op_type == "Conv"
          and next(a.i for a in n.attribute if a.name == "group") > 1]
    assert len(dw) == 13


@pytest.mark.parametrize("name", zoo.NAMES)
def test_onnxruntime_inference_is_a_softmax_with_o1_activations(cache, models, name):
    model = models[name]
    # also read every BatchNormalization output: activations must stay O(1) through the depth
    probed = onnx.ModelProto()
    probed.CopyFrom(model)
    bn = [n.output[0] for n in model.graph.node if n.op_type == "BatchNormalization"]
    probed.graph.output.extend(onnx.helper.make_tensor_value_info(b, onnx.TensorProto.FLOAT, None) for b in bn)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(probed.SerializeToString(), options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(123).standard_normal((1, 3, 224, 224)).astype(np.float32)
    out, *bn_out = session.run(None, {"input": x})
    assert out.shape == (1, CLASSES[name])
    assert np.isfinite(out).all()
    assert abs(float(out.sum()) - 1.0) < 1e-5
    assert out.min() >= 0 and out.std() > 1e-4 and out.max() < 0.999  # not constant, not one-hot
    rms = np.array([np.sqrt(np.mean(np.square(a, dtype=np.float64))) for a in bn_out])
    assert 0.1 < rms.min() and rms.max() < 10.0, (rms.min(), rms.max())
    # the cached file loads in ONNX Runtime as it is
    assert ort.InferenceSession(str(zoo.model_path(name, cache)), providers=["CPUExecutionProvider"])


def test_cache_returns_same_file_without_rebuilding(cache, monkeypatch):
    path = zoo.model_path("mobilenet_v1_025", cache)
    stamp = path.stat().st_mtime_ns
    monkeypatch.setattr(zoo, "build", lambda *a, **k: pytest.fail("rebuilt a cached model"))
    again = zoo.model_path("mobilenet_v1_025", cache)
    assert again == path and again.stat().st_mtime_ns == stamp
    assert f"-v{zoo.VERSION}-" in path.name
    assert not [p for p in cache.iterdir() if p.suffix == ".tmp"]  # no temp files left behind


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMTRADE_CACHE", str(tmp_path))
    path = zoo.model_path("mobilenet_v1_025")
    assert path.parent == tmp_path / "zoo" and path.is_file()


def test_same_seed_same_bytes_and_cache_round_trip(cache):
    first = zoo.build("mobilenet_v1_025").SerializeToString()
    assert zoo.build("mobilenet_v1_025").SerializeToString() == first
    assert zoo.model_path("mobilenet_v1_025", cache).read_bytes() == first
    other = zoo.build("mobilenet_v1_025", seed=1)
    assert other.SerializeToString() != first
    # a different seed changes weights, not the architecture
    assert count_params(other) == count_params(onnx.load_from_string(first))


def test_bn_running_stats_are_moderate(models):
    inits = {t.name: numpy_helper.to_array(t) for t in models["resnet50"].graph.initializer}
    for node in models["resnet50"].graph.node:
        if node.op_type == "BatchNormalization":
            gamma, var = inits[node.input[1]], inits[node.input[4]]
            assert (0.7 <= gamma).all() and (gamma <= 1.3).all()
            assert (var > 0).all()


def test_unknown_name_is_an_input_error_listing_known_names(cache):
    with pytest.raises(InputError) as err:
        zoo.model_path("vgg16", cache)
    message = str(err.value)
    assert "vgg16" in message and "\n" not in message
    assert all(name in message for name in zoo.NAMES)
    with pytest.raises(InputError):
        zoo.build("resnet")
    assert not os.listdir(cache) or all(not p.startswith("vgg16") for p in os.listdir(cache))

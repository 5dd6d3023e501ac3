"""Real exporters' patterns, each built with onnx.helper in the node order
torch.onnx writes: the layer count, the parameter count (computed here from the model's
own initializers), the fused activation, and deployed outputs equal to ONNX Runtime on the
original file, whole and with every layer that can by parts."""
from __future__ import annotations

import shutil

import numpy as np
import onnx
import pytest
from onnx import numpy_helper as nh

from csdf.onnx_import import load_onnx
from csdf.parts import all_parts, can_split
from deploy.build.derive import derive
from deploy.run.measure import measure
from onnx_cases import (convnext_block, hardswish_block, mnasnet_head, mobilenet_block,
                        shared_weights, shuffle_block, shuffle_block_folded)
from deploy_fixtures import make_plan


def inits(path) -> dict[str, np.ndarray]:
    return {i.name: nh.to_array(i) for i in onnx.load(str(path)).graph.initializer}


def deployed_diff(cnn, tmp_path, parts: bool | int) -> float:
    """Largest |deployed - reference| relative to the largest |reference| output; also
    checks the arena equals the plan's buffer bytes and outputs are of order 1. `parts`:
    True for every layer that can row by row, a number for that many phases of each."""
    phases = ({n: 1 for n in cnn.order()} if parts is False else all_parts(cnn)
              if parts is True else {n: (parts if k > 1 else 1) for n, k in all_parts(cnn).items()})
    return phases_diff(cnn, tmp_path / ("parts" if parts else "whole"), phases)


def phases_diff(cnn, out, phases: dict, order_of_one=(0.3, 30)) -> float:
    """The same for the plan of `phases`, deployed into `out`; the largest |reference|
    output must lie in `order_of_one`."""
    plan = make_plan([cnn], {cnn.name: phases})
    shutil.rmtree(out, ignore_errors=True)
    derive(plan, {cnn.name: cnn}, out)
    # one thread: the same outputs; ONNX Runtime's default gives each of the dozens of step
    # sessions a thread pool of its own, whose making and joining are most of the run
    result = measure(out, frames=2, threads=1)
    assert result["arena_bytes"] == plan["buffer_bytes"]
    size = result["max_abs_output"][cnn.name]
    assert order_of_one[0] < size < order_of_one[1], size   # a vanishing net proves nothing
    return result["max_abs_diff"][cnn.name] / size


def check_deploys(cnn, tmp_path):
    for parts in (False, True):
        assert deployed_diff(cnn, tmp_path, parts) < 1e-5


def test_mobilenet_clip_bounds_after_the_conv(tmp_path):
    path = mobilenet_block(tmp_path / "m.onnx")
    cnn = load_onnx(path, "m")
    assert [cnn.layer(n).op for n in cnn.order()] == ["Input", "Conv", "Conv", "Conv", "Add"]
    dw = cnn.layer(cnn.order()[2])
    assert dw.hyper["activation"] == ["Clip"] and (dw.hyper["clip_min"], dw.hyper["clip_max"]) == (0.0, 6.0)
    w = inits(path)
    convs = [k for k in w if k.startswith("conv") and k.endswith(".weight")]
    assert cnn.param_count == sum(w[k].size + w[k].shape[0] for k in convs)   # folded W + B
    check_deploys(cnn, tmp_path)


def test_hardswish_opset13_equals_opset17(tmp_path):
    a = load_onnx(hardswish_block(tmp_path / "a.onnx", 13), "a")
    b = load_onnx(hardswish_block(tmp_path / "b.onnx", 17), "b")
    assert len(a.graph) == len(b.graph) == 5
    assert [a.layer(n).hyper.get("activation") for n in a.order()] == \
        [b.layer(n).hyper.get("activation") for n in b.order()] == [None, ["HardSwish"], None, ["HardSigmoid"], None]
    assert a.param_count == b.param_count
    check_deploys(a, tmp_path)


@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_mean_is_a_global_pool(tmp_path, keepdims):
    cnn = load_onnx(mnasnet_head(tmp_path / "r.onnx", keepdims), "r")
    ops = [cnn.layer(n).op for n in cnn.order()]
    assert ops == ["Input", "Conv", "GlobalAveragePool"] + ([] if not keepdims else ["Flatten"]) + ["Gemm"]
    assert cnn.layer(cnn.order()[2]).output_shape == (1, 8, 1, 1)
    check_deploys(cnn, tmp_path)


def test_channel_shuffle_is_one_per_pixel_layer(tmp_path):
    path = shuffle_block(tmp_path / "s.onnx")
    cnn = load_onnx(path, "s")
    ops = [cnn.layer(n).op for n in cnn.order()]
    assert ops == ["Input", "Conv", "Opaque", "Conv"]
    shuffle = cnn.layer("shuffle_Reshape_1")
    assert shuffle.hyper["onnx_ops"] == ["Reshape", "Transpose", "Reshape"]
    assert shuffle.hyper["per_pixel"] and can_split(shuffle) and shuffle.param_count == 0
    assert all_parts(cnn)["shuffle_Reshape_1"] == 8
    check_deploys(cnn, tmp_path)


@pytest.mark.parametrize("opset", [13, 17, 18])
def test_folded_channel_shuffle_by_parts_of_every_size(tmp_path, opset):
    """ShuffleNetV2 at opset 17 (TorchScript) by parts of several rows: its shapes are
    constants for the whole height (ORT's "Got invalid dimensions for output" where a part
    keeps them). Parts of 4, 3 (3, 3, 2), 2 and 1 rows all match ORT on the file."""
    cnn = load_onnx(shuffle_block_folded(tmp_path / "s.onnx", opset), "s")
    assert [cnn.layer(n).op for n in cnn.order()] == ["Input", "Conv", "Opaque", "Conv"]
    assert cnn.layer(cnn.order()[2]).hyper["per_pixel"]
    for phases in (2, 3, 4, 8):
        assert deployed_diff(cnn, tmp_path, phases) < 1e-5, phases


@pytest.mark.parametrize("opset", [13, 17])
def test_convnext_block_is_one_per_pixel_layer(tmp_path, opset):
    path = convnext_block(tmp_path / "c.onnx", opset)
    cnn = load_onnx(path, "c")
    ops = [cnn.layer(n).op for n in cnn.order()]
    assert ops == ["Input", "Conv", "Conv", "Opaque", "Mul", "Add"]
    block = cnn.layer(cnn.order()[3])
    assert block.hyper["per_pixel"] and block.hyper["onnx_ops"][0] == block.hyper["onnx_ops"][-1] == "Transpose"
    w = inits(path)
    assert block.param_count == sum(w[k].size for k in w if k.startswith(("ln.", "fc1.", "fc2.")))
    # the framework's count: every initializer (scalars are Constant nodes), BN-free net
    assert cnn.param_count == cnn.original_param_count == sum(a.size for a in w.values())
    check_deploys(cnn, tmp_path)


def test_shared_initializer_counted_once_and_bn_two_per_channel(tmp_path):
    path = shared_weights(tmp_path / "w.onnx")
    cnn = load_onnx(path, "w")
    w = inits(path)
    bn = cnn.layer(cnn.order()[-1])
    assert bn.op == "BatchNormalization" and bn.hyper["activation"] == ["Relu"] and bn.param_count == 2 * 8
    first = w[next(k for k in w if k.startswith("conv"))]
    expected = first.size + 4 + w["tied.weight"].size + 2 * 8
    assert cnn.param_count == expected
    assert cnn.original_param_count == expected + 2 * 8    # BN stores 4 per channel in ONNX
    check_deploys(cnn, tmp_path)


def test_mobilenet_v2_as_pytorch_writes_it_gives_the_zoos_model(tmp_path):
    """The zoo's MobileNetV2 with every Clip's bounds rewritten as Constant nodes placed right
    after the Conv that feeds the Clip (torch.onnx's order): the same 67 layers, hyper-
    parameters, parameters and edges, hence the zoo's figures."""
    zoo = pytest.importorskip("csdf.zoo")
    path = zoo.model_path("mobilenet_v2")
    model = onnx.load(path)
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    nodes = list(graph.node)
    producer = {o: k for k, n in enumerate(nodes) for o in n.output}
    after: dict[int, list] = {}
    for clip in (n for n in nodes if n.op_type == "Clip"):
        x = clip.input[0]
        while nodes[producer[x]].op_type != "Conv":      # back to the Conv (through BN)
            x = nodes[producer[x]].input[0]
        for t in clip.input[1:]:
            after.setdefault(producer[x], []).append(
                onnx.helper.make_node("Constant", [], [t], value=inits.pop(t)))
    del graph.node[:]
    for k, n in enumerate(nodes):
        graph.node.append(n)
        graph.node.extend(after.get(k, []))
    del graph.initializer[:]
    graph.initializer.extend(inits.values())
    onnx.save(model, str(tmp_path / "torch_order.onnx"))
    zoo_cnn, torch_cnn = load_onnx(path, "m"), load_onnx(tmp_path / "torch_order.onnx", "m")
    assert len(torch_cnn.graph) == len(zoo_cnn.graph) == 67      # the zoo's ends in a Softmax
    assert torch_cnn.order() == zoo_cnn.order() and torch_cnn.edges() == zoo_cnn.edges()
    for name in zoo_cnn.order():
        a, b = zoo_cnn.layer(name), torch_cnn.layer(name)
        assert (a.op, a.hyper, a.output_shape) == (b.op, b.hyper, b.output_shape)
        assert a.params.keys() == b.params.keys() and all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
    assert torch_cnn.param_count == zoo_cnn.param_count

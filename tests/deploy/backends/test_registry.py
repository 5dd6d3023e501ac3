"""The backend registry (deploy/backends/registry.py): unknown names refused in one line,
capabilities that agree with what the backends' own code does (ONNX Runtime's layouts are
the ones OrtBackend takes; a plan a backend says it cannot run is refused by
derive.check_backend with its one line), and no backend name compared anywhere else."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from deploy.backends import registry
from deploy.build.derive import check_backend
from explorer.app.model import PRECISIONS
from explorer.plan.plan_file import from_dict
from sdf3.errors import InputError

ROOT = Path(__file__).resolve().parents[3]


def test_names_and_objects():
    assert registry.names() == ["onnxruntime", "tensorrt"]
    assert [registry.backend(n).name for n in registry.names()] == registry.names()
    assert registry.DEFAULT in registry.names()


@pytest.mark.parametrize("name", ["cuda", "", "ONNXRuntime"])
def test_unknown_name_is_one_line_naming_the_known(name):
    with pytest.raises(InputError) as err:
        registry.backend(name)
    text = str(err.value)
    assert "\n" not in text and repr(name) in text
    assert all(n in text for n in registry.names())


def test_ort_layouts_are_those_its_runtime_takes():
    from deploy.ort.backend import LAYOUTS, OrtBackend
    ort = registry.backend("onnxruntime")
    assert set(ort.capabilities.layouts) == set(LAYOUTS)
    for layout in ort.capabilities.layouts:
        be = ort.runtime("float32", 1, False, layout)
        assert isinstance(be, OrtBackend) and be.layout == layout


def test_backend_with_its_own_runner_has_no_executor_runtime():
    for name in registry.names():
        chosen = registry.backend(name)
        if chosen.capabilities.own_runner:
            with pytest.raises(InputError):
                chosen.runtime("float32")
            assert chosen.process_init(0, False, 0) is None
        else:
            assert callable(chosen.process_init(1, False, 0))


def test_stored_weights_by_precision():
    from deploy.quant.stored import WEIGHT_TYPES
    assert {p: registry.backend("onnxruntime").stored_weights(p) for p in PRECISIONS} == \
        {p: WEIGHT_TYPES[p] for p in PRECISIONS}
    assert {registry.backend("tensorrt").stored_weights(p) for p in PRECISIONS} == {"float32"}


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    from deploy_fixtures import make_plan, tiny_cnn
    cnn = tiny_cnn(tmp_path_factory.mktemp("reg"))
    return from_dict(make_plan([cnn], {cnn.name: {}}))


@pytest.mark.parametrize("name", ["onnxruntime", "tensorrt"])
@pytest.mark.parametrize("precision", list(PRECISIONS))
@pytest.mark.parametrize("tiles", [False, True])
def test_check_backend_refuses_what_capabilities_say(plan, name, precision, tiles):
    """check_backend passes a plan exactly when the backend claims its precision and, for a
    tiled plan, fused tiles; a refusal is one line naming a backend that can deploy it."""
    from csdf.tiling import Group
    p = replace(plan, precision=precision, data_bytes=PRECISIONS[precision].data_bytes,
                tilings={"tiny": (Group(("conv1", "relu1"), 2, 2),)} if tiles else {})
    caps = registry.backend(name).capabilities
    if precision in caps.precisions and (caps.fused_tiles or not tiles):
        check_backend(p, name, "p.json")
        return
    with pytest.raises(InputError) as err:
        check_backend(p, name, "p.json")
    text = str(err.value)
    assert "\n" not in text and text.startswith("p.json: ")
    assert f"cannot be deployed with --backend {name}; deploy it with --backend onnxruntime" in text


def test_tensorrt_refusals_keep_their_words(plan):
    from csdf.tiling import Group
    with pytest.raises(InputError, match=r"^plan: an int8 plan cannot be deployed with --backend "
                                         r"tensorrt; deploy it with --backend onnxruntime$"):
        check_backend(replace(plan, precision="int8", data_bytes=1), "tensorrt")
    tiled = replace(plan, tilings={"tiny": (Group(("conv1", "relu1"), 2, 2),)})
    with pytest.raises(InputError, match=r"^plan: a plan with fused tiles \(key 'tilings'\) cannot "
                                         r"be deployed with --backend tensorrt; deploy it with "
                                         r"--backend onnxruntime$"):
        check_backend(tiled, "tensorrt")
    with pytest.raises(InputError, match="expected one of onnxruntime, tensorrt"):
        check_backend(plan, "cuda")


QUOTED = r"""["'](?:onnxruntime|tensorrt)["']"""
COMPARED = re.compile(rf"""(?:==|!=|\bin)\s*[(\[{{]?\s*{QUOTED}|{QUOTED}\s*(?:==|!=|\bin\b)""")


def _compared(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if COMPARED.search(ln)]


def test_the_pattern_finds_comparisons():
    assert len(_compared('if b == "tensorrt":\nif x != \'onnxruntime\':\nif b in ("tensorrt", "y"):\n'
                         'if "onnxruntime" == b:\nif "tensorrt" in names:\n')) == 5
    assert _compared('parser.add_argument("--backend", default="onnxruntime")\n'
                     'name = "tensorrt"\nversion("onnxruntime")\n') == []


def test_no_backend_name_is_compared_outside_the_registry():
    """Outside deploy/backends/ (and the TensorRT board runner, which cannot import it) a
    backend is asked for by name and then asked; its name is never compared."""
    found = {}
    for top in ("explorer", "deploy", "memtrade", "benchmarks"):
        for f in sorted((ROOT / top).rglob("*.py")):
            rel = f.relative_to(ROOT)
            if rel.parts[:2] == ("deploy", "backends") or f.name == "board_runner.py" \
                    or (rel.parts[:2] == ("deploy", "tensorrt") and f.name.startswith("trt_")):
                continue
            if hits := _compared(f.read_text()):
                found[str(rel)] = hits
    assert found == {}

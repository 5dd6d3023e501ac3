"""Bad application files and flags, run as a user runs them (`explore ...`): one line on
stderr naming the file or flag, exit 2, no traceback, nothing silently accepted."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from explorer.app.appfile import load_app
from explorer.app.units import parse_memory
from explorer.app.yamlload import MAX_DEPTH
from refusals import one_line, refused
from sdf3.errors import InputError

GOOD = """name: t
precision: fp32
memory: 1MB
cnns:
  - name: tiny
    model: tiny.onnx
    fps: 30
"""


def _app(tmp_path: Path, tiny_onnx: Path, text: str | bytes) -> Path:
    if tiny_onnx != tmp_path / "tiny.onnx":
        shutil.copy(tiny_onnx, tmp_path / "tiny.onnx")
    path = tmp_path / "app.yaml"
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))

BAD_FILES = {
    # what the file says: (its text, words the one line must hold)
    "alias bomb": (GOOD.replace("name: t\n", "name: t\n") + "description: &d [1, 2]\n"
                   "search: *d\n", ("app.yaml", "aliases")),
    "billion laughs": (BOMB + GOOD, ("app.yaml", "aliases")),
    "deep nesting": (GOOD + "description: " + "[" * 100_000 + "]" * 100_000 + "\n",
                     ("app.yaml", f"deeper than {MAX_DEPTH}")),
    "duplicate key": (GOOD + "memory: 2MB\n", ("app.yaml", "duplicate key 'memory'", "line 3")),
    "duplicate nested key": (GOOD.replace("fps: 30", "fps: 30\n    fps: 40"),
                             ("duplicate key 'fps'",)),
    "precision list": (GOOD.replace("precision: fp32", "precision: [fp32, fp16]"),
                       ("precision", "expected one of")),
    "memory inf": (GOOD.replace("memory: 1MB", "memory: .inf"), ("memory", "finite")),
    "memory nan": (GOOD.replace("memory: 1MB", "memory: .nan"), ("memory", "finite")),
    "memory 1e400MB": (GOOD.replace("memory: 1MB", "memory: 1e400MB"), ("memory", "exponent")),
    "memory huge exponent": (GOOD.replace("memory: 1MB", "memory: 1e999999999"),
                             ("memory", "exponent")),
    "memory float overflow": (GOOD.replace("memory: 1MB", "memory: 1.0e+308"),
                              ("memory", "2^60 bytes")),
    "fps inf": (GOOD.replace("fps: 30", "fps: .inf"), ("cnns[0].fps", "and finite")),
    "fps nan": (GOOD.replace("fps: 30", "fps: .nan"), ("cnns[0].fps", "and finite")),
    "search nan": (GOOD + "search: {crossover: .nan}\n", ("search.crossover",)),
    "fps written out huge": (GOOD.replace("fps: 30", "fps: 1" + "0" * 400), ("cnns[0].fps",)),
    "population huge": (GOOD + "search: {population: 1" + "0" * 30 + "}\n",
                        ("search.population", "up to 100000")),
    "seed beyond 32 bits": (GOOD + "search: {seed: 4294967296}\n", ("search.seed",)),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_app_file_is_one_line(tmp_path, tiny_onnx, capsys, case):
    text, words = BAD_FILES[case]
    app = _app(tmp_path, tiny_onnx, text)
    refused(capsys, ["info", str(app)], *words)


def test_non_utf8_bytes_are_refused_with_their_offset(tmp_path, tiny_onnx, capsys):
    app = _app(tmp_path, tiny_onnx, GOOD.encode() + b"description: caf\xe9\n")
    refused(capsys, ["info", str(app)], "app.yaml", "not UTF-8", "0xe9",
             f"offset {len(GOOD) + len('description: caf')}")


BAD_FLAGS = {
    "--mem inf": (["--mem", "inf"], "--mem"),
    "--mem 1e400MB": (["--mem", "1e400MB"], "exponent"),
    "--mem 1e999999999": (["--mem", "1e999999999"], "exponent"),
    "--fps twice": (["--fps", "tiny=5,tiny=7"], "'tiny' is given twice"),
    "--fps inf": (["--fps", "inf"], "finite"),
    "--fps 1e999": (["--fps", "tiny=1e999"], "finite"),
    "--generations huge": (["--generations", "1" + "0" * 20], "--generations"),
    "--seed negative": (["--seed", "-1"], "--seed"),
    "--workers negative": (["--workers", "-1"], "--workers: expected a non-negative integer"),
    "--relink-rounds huge": (["--relink-rounds", "1001"], "--relink-rounds: expected"),
    "--local-rounds negative": (["--local-rounds", "-1"], "--local-rounds: expected"),
}


@pytest.mark.parametrize("case", sorted(BAD_FLAGS))
def test_bad_flags_are_refused_before_the_search(tmp_path, tiny_onnx, capsys, case):
    flags, words = BAD_FLAGS[case]
    app = _app(tmp_path, tiny_onnx, GOOD)
    refused(capsys, [str(app), "--out", str(tmp_path / "out"), *flags], words)
    assert not (tmp_path / "out").exists()


def test_the_good_file_still_loads(tmp_path, tiny_onnx):
    app = load_app(_app(tmp_path, tiny_onnx, GOOD), fps="tiny=5")
    assert app.memory == 2**20 and app.fps == {"tiny": 5.0}
    # anchors without aliases and merge-free mappings are plain YAML, still accepted
    app = load_app(_app(tmp_path, tiny_onnx, GOOD.replace("memory: 1MB", "memory: &m 1MB")))
    assert app.memory == 2**20


@pytest.mark.parametrize("text, expected", [
    ("8MB", 8 * 2**20), ("0.5KB", 512), ("1e3", 1000), ("2.5e-3MB", round(2.5e-3 * 2**20)),
    (1e3, 1000), (2**60, 2**60)])
def test_memory_figures_in_range_still_parse(text, expected):
    assert parse_memory(text) == expected


@pytest.mark.parametrize("text", [float("inf"), float("-inf"), float("nan"), 2**60 + 1,
                                  "1e31", "1e-31", "9" * 30 + "GB", "1e" + "9" * 5000])
def test_memory_figures_out_of_range_are_input_errors(text):
    with pytest.raises(InputError):
        parse_memory(text)


def _cyclic_onnx(path: Path) -> Path:
    """conv -> add -> relu -> add: the Add reads the Relu's output, which reads the Add's."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "r"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["r"], name="relu")]
    graph = helper.make_graph(
        nodes, "cyc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 4, 8, 8])],
        [numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("command", [["info"], ["baselines"], []])
def test_a_cyclic_onnx_graph_is_one_line_naming_the_cycle(tmp_path, capsys, command):
    """A cycle (Add -> Relu -> Add) is one line at `explore info`, not networkx's traceback."""
    _cyclic_onnx(tmp_path / "cyc.onnx")
    app = tmp_path / "app.yaml"
    app.write_text("name: c\ncnns:\n  - {name: c, model: cyc.onnx}\n")
    extra = [] if command else ["--out", str(tmp_path / "run"), "--quiet"]
    refused(capsys, [*command, str(app), *extra], "cyc.onnx", "cycle",
             "'add' (Add) -> 'relu' (Relu) -> 'add' (Add)")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("threads", ["-1", "100000"])
@pytest.mark.parametrize("command", ["run", "profile", "primitives"])
def test_bad_thread_counts_are_refused_before_onnx_runtime(tmp_path, tiny_onnx, capsys,
                                                           command, threads):
    """`explore run --threads -1` is one line, not ONNX Runtime's own traceback."""
    target = str(tmp_path) if command == "run" else str(_app(tmp_path, tiny_onnx, GOOD))
    extra = ["--out", str(tmp_path / "out")] if command != "run" else []
    refused(capsys, [command, target, "--threads", threads, *extra],
             f"--threads: expected 0 (one per core) or a thread count up to 1024, got {threads}")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, words", [
    (["apps/worked_example.yaml", "--population", "two"], ("argument --population", "'two'")),
    (["profile", "apps/worked_example.yaml", "--threads", "two"], ("profile: argument --threads",)),
    (["primitives", "apps/worked_example.yaml", "--repeats", "x"], ("primitives: argument --repeats",)),
    (["run"], ("run: the following arguments are required: dir",)),
    (["apps/worked_example.yaml", "--effort", "fast"], ("argument --effort", "'fast'"))])
def test_command_line_refusals_are_one_line(argv, words, capsys):
    from explorer.cli.main import main
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    captured = capsys.readouterr()
    one_line(captured.err, captured.out, words)

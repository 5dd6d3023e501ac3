"""Records, not dicts, between the deploy modules: a dict key looked up by a string literal
(`x["key"]`, `x.get("key")`) belongs where JSON, ONNX or other files are read or written
(the records' from_dict / to_dict, an ONNX node's attributes), and the deployment's steps,
profiles and probes travel as frozen dataclasses (deploy/runtime/step_records.py,
deploy/runtime/manifest_records.py, deploy/profile/*). The TensorRT board runner (trt_*.py,
board_runner.py) runs on the board under Python 3.6 with plain dicts and is not counted."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a one-string subscript or list (`["key"]`, `['key']`) or a .get of a string literal
LOOKUP = re.compile(r"""\["[^"]*"\]|\.get\("|\['[^']*'\]|\.get\('""")
LIMIT = 80


def lookups() -> dict[str, int]:
    """Matches per module of deploy/, the board runner's files left out."""
    out = {}
    for path in sorted((ROOT / "deploy").rglob("*.py")):
        if path.name.startswith("trt_") or path.name == "board_runner.py":
            continue
        n = len(LOOKUP.findall(path.read_text()))
        if n:
            out[str(path.relative_to(ROOT))] = n
    return out


def test_deploy_looks_up_few_dict_keys():
    found = lookups()
    assert sum(found.values()) <= LIMIT, sorted(found.items(), key=lambda kv: -kv[1])

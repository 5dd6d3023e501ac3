"""A front point checked before its plan is derived (`explore deploy --point N`,
`memtrade.deploy(..., point=N)`, `Exploration.plan_of`): pareto.json is a file a user may
edit, so every field the derivation reads is checked here, each refusal one line naming the
file, the key and what was expected.

- the file: a JSON object with `points` (a list), `app` (the app file's path), `cnns` and
  `genes` (lists of names), `precision`, `placement`, `granularity`, `tiling`,
  `evaluator` and `constraints` of the types `explore` writes;
- the point number: a whole number naming one of the points;
- the point: an object whose `genes` are whole numbers (not true/false, not 2.5),
  `memory_bytes` a whole number of bytes and `fps` a number per CNN;
- against the app: the front's CNNs and gene labels are the app's (another app's front is
  refused), the point has one gene per gene of the app, each within its range 0..upper.

The figures a point lists are never copied into a plan: its fps are computed again from the
genes (the derivation's evaluator), and when the file's differ the plan carries the computed
ones and `warn` says so; its memory is derived again, and a point whose derived memory is
not the one it lists is refused (memtrade/front_point.py), since memory is a pure function
of the genes and the app.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from sdf3.errors import InputError

WRITTEN_BY = "a pareto.json written by `explore APP.yaml`"
FPS_TOLERANCE = 1e-9          # relative: a figure printed and read back through JSON is exact


@dataclass(frozen=True)
class FrontFile:
    """What pareto.json says the search ran with, checked for type."""
    where: str
    app: str
    cnns: tuple[str, ...]
    genes: tuple[str, ...]
    precision: str
    placement: str
    granularity: str
    tiling: str | None
    evaluator: str | None
    memory_bytes: int | None
    fps: Mapping[str, float]
    points: tuple[Any, ...]


@dataclass(frozen=True)
class PointFigures:
    """One point's genes and listed figures, checked for type."""
    genes: tuple[int, ...]
    memory_bytes: int
    fps: Mapping[str, float]


def whole(value: Any) -> bool:
    """An int that is not a bool (JSON's true/false read as 1/0 in Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


def number(value: Any) -> bool:
    """A finite int or float that is not a bool."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def front_file(data: Any, where: str) -> FrontFile:
    """`data` (pareto.json parsed) as a FrontFile, or InputError naming the key."""
    from explorer.app.model import GRANULARITIES, PRECISIONS
    from memtrade.settings import TILINGS

    def fail(key: str, expected: str, got: Any = ...) -> InputError:
        shown = "" if got is ... else f", got {_short(got)}"
        return InputError(f"{where}: {key}: expected {expected}{shown}")

    if not isinstance(data, dict):
        raise InputError(f"{where}: expected {WRITTEN_BY} (a JSON object), got {type(data).__name__}")
    for key in ("points", "app", "cnns", "genes"):
        if key not in data:
            raise InputError(f"{where}: missing key {key!r}; expected {WRITTEN_BY}")
    if "precision" not in data:
        raise InputError(f"{where}: written before --point was possible; run `explore` again")
    if not isinstance(data["points"], list):
        raise fail("points", "a list of points", data["points"])
    if not isinstance(data["app"], str) or not data["app"]:
        raise fail("app", "the path of the application file", data["app"])
    for key in ("cnns", "genes"):
        if not isinstance(data[key], list) or not all(isinstance(x, str) for x in data[key]):
            raise fail(key, "a list of names", data[key])
    if data.get("precision") not in PRECISIONS:
        raise fail("precision", f"one of {', '.join(PRECISIONS)}", data.get("precision"))
    if not isinstance(data.get("placement"), str):
        raise fail("placement", "a placement's name", data.get("placement"))
    if data.get("tiling") is not None and data["tiling"] not in TILINGS:
        raise fail("tiling", f"null or one of {', '.join(TILINGS)}", data["tiling"])
    if data.get("granularity") not in GRANULARITIES:
        raise fail("granularity", f"one of {', '.join(GRANULARITIES)}", data.get("granularity"))
    if data.get("evaluator") is not None and not isinstance(data["evaluator"], str):
        raise fail("evaluator", "a profile's name or path, or null", data["evaluator"])
    cons = {} if data.get("constraints") is None else data["constraints"]
    if not isinstance(cons, dict):
        raise fail("constraints", "an object with memory_bytes and fps", cons)
    memory = cons.get("memory_bytes")
    if memory is not None and not (whole(memory) and memory >= 0):
        raise fail("constraints.memory_bytes", "a whole number of bytes or null", memory)
    fps = {} if cons.get("fps") is None else cons["fps"]
    if not isinstance(fps, dict) or not all(number(v) and v >= 0 for v in fps.values()):
        raise fail("constraints.fps", "an object of CNN name -> frames per second", fps)
    return FrontFile(where, data["app"], tuple(data["cnns"]), tuple(data["genes"]),
                     data["precision"], data["placement"], data["granularity"],
                     data.get("tiling"), data.get("evaluator"), memory,
                     {str(k): float(v) for k, v in fps.items()}, tuple(data["points"]))


def point_index(n: Any, count: int, where: str) -> int:
    """`n` as the number of one of `count` points, or InputError."""
    if not whole(n):
        raise InputError(f"--point: expected a whole number from 0 to {count - 1} (the points "
                         f"of {where}), got {_short(n)}")
    if not 0 <= n < count:
        raise InputError(f"--point: expected 0 to {count - 1} (the points of {where}), got {n}")
    return n


def point_figures(raw: Any, n: int, where: str) -> PointFigures:
    """Point `n`'s genes, memory and fps as the file lists them, checked for type."""
    key = f"points[{n}]"
    if not isinstance(raw, dict):
        raise InputError(f"{where}: {key}: expected an object with genes, memory_bytes and fps, "
                         f"got {_short(raw)}")
    genes = raw.get("genes")
    if not isinstance(genes, list) or not all(whole(g) for g in genes):
        raise InputError(f"{where}: {key}.genes: expected a list of whole numbers, got {_short(genes)}")
    memory = raw.get("memory_bytes")
    if not (whole(memory) and memory >= 0):
        raise InputError(f"{where}: {key}.memory_bytes: expected a whole number of bytes, got "
                         f"{_short(memory)}")
    fps = raw.get("fps")
    if not isinstance(fps, dict) or not all(number(v) and v >= 0 for v in fps.values()):
        raise InputError(f"{where}: {key}.fps: expected an object of CNN name -> frames per "
                         f"second, got {_short(fps)}")
    return PointFigures(tuple(genes), memory, {str(k): float(v) for k, v in fps.items()})


def same_app(front: FrontFile, app, labels: tuple[str, ...]) -> None:
    """The front was written for `app`: its CNNs and gene labels are the app's."""
    if list(front.cnns) != list(app.cnns) or tuple(front.genes) != tuple(labels):
        what = ("CNNs " + ", ".join(front.cnns) if list(front.cnns) != list(app.cnns)
                else f"{len(front.genes)} genes")
        want = ("CNNs " + ", ".join(app.cnns) if list(front.cnns) != list(app.cnns)
                else f"{len(labels)} genes")
        raise InputError(f"{front.where}: a front of {what}, but its app {front.app} has {want} "
                         f"(another app's front, or the app changed since `explore` ran)")


def checked_genes(genes: Any, labels, upper, where: str) -> tuple[int, ...]:
    """`genes` as a chromosome of the problem whose genes are `labels`, gene i in 0..upper[i]."""
    if not isinstance(genes, (list, tuple)) or not all(whole(g) for g in genes):
        raise InputError(f"{where}: genes: expected a list of whole numbers, got {_short(genes)}")
    if len(genes) != len(upper):
        raise InputError(f"{where}: genes: expected {len(upper)} (one per gene of the app), got "
                         f"{len(genes)}")
    for label, g, top in zip(labels, genes, upper):
        if not 0 <= g <= top:
            raise InputError(f"{where}: gene {label}: expected 0 to {top}, got {g}")
    return tuple(int(g) for g in genes)


def recomputed_fps(problem, genes: tuple[int, ...], listed: Mapping[str, float], where: str,
                   warn: Callable[[str], None] | None) -> dict[str, float]:
    """The fps of `genes` as the problem computes them; `warn` hears when `listed` (the
    file's figures) are not those."""
    _, fps = problem(genes)
    fps = {c: float(v) for c, v in fps.items()}
    off = [c for c in fps if c not in listed
           or abs(listed[c] - fps[c]) > FPS_TOLERANCE * max(abs(fps[c]), 1.0)]
    if off and warn is not None:
        said = ", ".join(f"{c} {listed[c]:g}" if c in listed else f"{c} none" for c in off)
        warn(f"{where}: the point lists {said} fps; its genes give "
             + ", ".join(f"{c} {fps[c]:.2f}" for c in off) + " fps, which the plan carries")
    return fps


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."

"""Adapter for the real SDF3 binaries, for cross-checking our engine.

SDF3 is a C++ tool that no package registry carries. When a user has it, `find_sdf3()`
locates `sdf3analysis-csdf` on PATH or in $SDF3_HOME/bin (or $SDF3_HOME), `run_sdf3()` runs
one algorithm on a graph, and `parse_output()` reads what it prints (also the transcripts in
../shared/sdf3/*.out, which hold several `$ sdf3analysis-csdf ...` runs).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

from sdf3.graph import Graph
from sdf3.tradeoff import TradeoffPoint
from sdf3.xml import write_xml

BINARY = "sdf3analysis-csdf"


@dataclass
class Sdf3Result:
    """What SDF3 printed, per algorithm; fields stay None/empty for algorithms not run."""
    consistent: bool | None = None
    repetition_vector: dict[str, int] = field(default_factory=dict)
    repetition_vector_sum: int | None = None
    throughput: float | None = None
    tradeoff: list[TradeoffPoint] = field(default_factory=list)


def find_sdf3() -> str | None:
    """Path of sdf3analysis-csdf, or None when SDF3 is not installed."""
    home = os.environ.get("SDF3_HOME")
    if home:
        for d in (Path(home) / "bin", Path(home)):
            if (d / BINARY).is_file() and os.access(d / BINARY, os.X_OK):
                return str(d / BINARY)
    return shutil.which(BINARY)


def _parse_tradeoff(text: str) -> list[TradeoffPoint]:
    root = etree.fromstring(text.encode())
    points = []
    for ds in root.iter("distributionsSet"):
        dists = [{ch.get("name"): int(ch.get("sz")) for ch in d.iter("ch")}
                 for d in ds.iter("distribution")]
        points.append(TradeoffPoint(float(ds.get("thr")), int(ds.get("sz")), dists))
    return points


def parse_output(text: str, result: Sdf3Result | None = None) -> Sdf3Result:
    """Read SDF3's printed answers (one run or a transcript of several)."""
    r = result or Sdf3Result()
    if "Graph is consistent" in text:
        r.consistent = True
    elif re.search(r"Graph is not consistent|inconsistent", text, re.I):
        r.consistent = False
    block = re.search(r"Repetition vector:\s*\n((?:\s*\[[^\]]+\]\s*=\s*\d+\s*\n?)+)", text)
    if block:
        r.repetition_vector = {m.group(1): int(m.group(2))
                               for m in re.finditer(r"\[([^\]]+)\]\s*=\s*(\d+)", block.group(1))}
    m = re.search(r"Repetition vector sum:\s*(\d+)", text)
    if m:
        r.repetition_vector_sum = int(m.group(1))
    m = re.search(r"thr\([^)]*\)\s*=\s*([0-9.eE+-]+|inf)", text)
    if m:
        r.throughput = float(m.group(1))
    m = re.search(r"<\?xml.*?</sdf3>", text, re.S)
    if m and "storageThroughputTradeOffs" in m.group(0):
        r.tradeoff = _parse_tradeoff(re.sub(r"<\?xml[^>]*\?>", "", m.group(0), count=1))
    return r


def run_sdf3(graph: Graph | str | Path, algos=("consistency", "repetition_vector",
                                               "throughput", "buffersize"),
             timeout: float = 600) -> Sdf3Result:
    """Run the real SDF3 on a Graph (written to a temp file) or an XML file."""
    exe = find_sdf3()
    if exe is None:
        raise FileNotFoundError(f"{BINARY} not found on PATH or in $SDF3_HOME/bin")
    with tempfile.TemporaryDirectory() as tmp:
        if isinstance(graph, Graph):
            path = Path(tmp) / f"{graph.name}.xml"
            write_xml(graph, path)
        else:
            path = Path(graph)
        result = Sdf3Result()
        for algo in algos:
            proc = subprocess.run([exe, "--graph", str(path), "--algo", algo],
                                  capture_output=True, text=True, timeout=timeout)
            if proc.returncode != 0:
                raise RuntimeError(f"{BINARY} --algo {algo} failed: {proc.stderr.strip()}")
            parse_output(proc.stdout, result)
    return result

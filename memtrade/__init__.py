"""memtrade's Python API: the methodology of Minakova & Stefanov (TODAES 2022) as functions a
program calls, the `explore` command being a thin shell over them (docs/api.md).

    app = memtrade.load_app("app.yaml")                  # or a mapping of the same keys
    found = memtrade.explore(app, mem="8MB", fps=71)     # the front, the chosen plan
    found.write("out")                                   # the files `explore` writes
    memtrade.deploy(found, "dep")                        # step models over one arena
    with memtrade.Session("dep") as sess:                # loaded once
        outputs = sess.run(frame)                        # as InferenceSession.run(None, ...)
    result = memtrade.run("dep", frames=20)              # measured fps, bytes, verdict

A facade over the layers sdf3 <- csdf <- explorer <- deploy, which it only calls.

May import: explorer.app, explorer.memory, explorer.throughput, explorer.plan, explorer.search, explorer.tiling, explorer.primitives, explorer.report, deploy, csdf, sdf3.
"""
from __future__ import annotations

from memtrade.app import load_app, with_constraints
from memtrade.info import info
from memtrade.deployment import Deployment, deploy
from memtrade.exploration import Exploration, FrontPoint, explore
from memtrade.measuring import RunResult, run
from memtrade.primitives import Primitives, primitives
from memtrade.profiling import profile
from memtrade.session import Session
from sdf3.errors import InputError

__all__ = ["Deployment", "Exploration", "FrontPoint", "InputError", "Primitives", "RunResult",
           "Session", "deploy", "explore", "info", "load_app", "primitives", "profile", "run",
           "with_constraints"]

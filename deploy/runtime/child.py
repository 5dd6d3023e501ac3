"""Environment for a measurement child process (`python -m deploy...`): the project's root on
PYTHONPATH, so the child imports this checkout's modules whether or not it is installed, and
this process's id, so the child ends with it (sdf3/parent_death.py)."""
from __future__ import annotations

import os
from pathlib import Path



from sdf3.parent_death import ENV as PARENT_ENV

ROOT = str(Path(__file__).resolve().parents[2])   # the folder holding deploy/


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with the project root first on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    env[PARENT_ENV] = str(os.getpid())     # the child ends with this process (sdf3/parent_death.py)
    return env

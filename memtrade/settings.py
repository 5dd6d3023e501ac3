"""The search settings of a run: the app's `search:` with what the caller sets on top.

The same checks for `explore --population 5` and `memtrade.explore(app, population=5)`;
a refusal names the setting the way its caller spelled it (`flag`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from explorer.app.appfile import SEARCH_LIMITS, time_limit
from explorer.app.model import EFFORTS, GRANULARITIES, SearchSettings
from sdf3.errors import InputError

SCALED_BY_EFFORT = ("population", "generations", "relink_rounds")
COUNTS = ("seed", "population", "generations", "workers", "relink_rounds", "local_rounds")
TILINGS = ("parts", "tiles", "both")


def cli_flag(key: str) -> str:
    """`relink_rounds` as the command line spells it: `--relink-rounds`."""
    return "--" + key.replace("_", "-")


def search_settings(base: SearchSettings, *, granularity: str | None = None,
                    cluster: str | None = None, effort: str | None = None,
                    time_limit_s: float | None = None, flag: Callable[[str], str] = str,
                    **counts: int | None) -> SearchSettings:
    """`base` with every setting that is not None replaced, each checked: `counts` are the
    whole numbers of COUNTS (population and generations at least 1, the rest at least 0, all
    at most explorer.app.appfile.SEARCH_LIMITS). Population, generations and relinking
    rounds set here are fixed: the effort fit (explorer/search/effort.py) leaves them."""
    s = base
    if granularity is not None:
        if granularity not in GRANULARITIES:
            raise InputError(f"{flag('granularity')}: expected one of {', '.join(GRANULARITIES)}, "
                             f"got {granularity!r}")
        s = replace(s, granularity=granularity)
    if cluster:
        s = replace(s, cluster=str(cluster).strip())
    if effort is not None:
        if effort not in EFFORTS:
            raise InputError(f"{flag('effort')}: expected one of {', '.join(EFFORTS)}, got {effort!r}")
        s = replace(s, effort=effort)
    if time_limit_s is not None:
        s = replace(s, time_limit=time_limit(time_limit_s, flag("time_limit")))
    for key in COUNTS:
        value = counts.pop(key, None)
        if value is None:
            continue
        low = 1 if key in ("population", "generations") else 0
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= SEARCH_LIMITS[key]:
            raise InputError(f"{flag(key)}: expected a {'non-negative' if low == 0 else 'positive'}"
                             f" integer up to {SEARCH_LIMITS[key]}, got {value}")
        s = replace(s, **{key: value})
        if key in SCALED_BY_EFFORT:
            s = replace(s, fixed=tuple(dict.fromkeys(s.fixed + (key,))))
    if counts:
        raise TypeError(f"unknown search settings: {', '.join(sorted(counts))}")
    return s


def check_tiling(tiling: str | None, flag: Callable[[str], str] = str) -> str | None:
    if tiling is not None and tiling not in TILINGS:
        raise InputError(f"{flag('tiling')}: expected one of {', '.join(TILINGS)}, got {tiling!r}")
    return tiling

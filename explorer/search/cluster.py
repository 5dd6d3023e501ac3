"""Chromosomes evaluated on a Dask distributed cluster (`--cluster ADDRESS`,
`search.cluster`): the same batches as the local pool (explorer/search/parallel.py),
sent with `Client.map` and collected with `Client.gather`, which returns the answers in the
order asked, so the front is the one a single process finds for the same seed.

The evaluation (the application with its CNNs and weights, the throughput profile, the gene
space) is pickled once into bytes and scattered to every worker (`Client.scatter(broadcast=True)`),
each worker unpickling it once: the
workers need memtrade installed, not the files the application was read from, so no shared
filesystem is assumed. Start a scheduler and workers anywhere the explorer can reach:

    dask scheduler                      # prints tcp://HOST:8786
    dask worker tcp://HOST:8786 --nthreads 1 --nworkers 4     # on each machine
    explore APP.yaml --mem 0 --cluster tcp://HOST:8786

A scheduler that does not answer within TIMEOUT seconds is one line and exit 2.

The scheduler must not run in the explorer's own process (as `LocalCluster()` puts it):
it draws from Python's `random` on its own thread (worker choice, work stealing) while
DEAP draws the search's crossovers and mutations from the same module, and the front would
then depend on timing. `local_processes(n)` starts a scheduler and n workers as processes
of their own on this machine, for trying the cluster path (tests, benchmarks).
"""
from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from explorer.search.parallel import Key, Result
from sdf3.errors import InputError

TIMEOUT = 10          # seconds to reach the scheduler
SLICES_PER_WORKER = 2  # tasks per worker and batch: balance against per-task round trips
# Dask's housekeeping for the processes local_processes starts: by default a worker samples
# its task thread's stack every 10 ms (the profiler), every event loop ticks every 20 ms and
# polls the system every 500 ms; on a small machine they compete for the cores and the GIL
# with the evaluations (docs/search.md says how to start a user's own workers alike)
WORKER_ENV = {"DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
              "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
              "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "5s",
              "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s"}


# On a worker: token -> the evaluation, unpickled once. Process state by necessity: Dask runs
# `_remote` as a plain function in each task, and only the worker process outlives a task,
# so the evaluation (and the RunCache it carries, explorer/memory/cache.py) is kept here,
# one search's at a time. The explorer's own process never fills it.
_LOADED: dict[str, Callable[[Key], Result]] = {}


def _remote(keys: list[Key], blob: bytes, token: str) -> list[Result]:
    """On a worker: a slice of a batch, with the evaluation unpickled once per process.
    The evaluation travels as pickled bytes, not as an object: Dask may copy scattered data
    from one worker to another at any time, and an evaluation object pickled while a task
    fills its caches fails ("dictionary changed size during iteration"), leaving the batch
    waiting for ever; bytes never change."""
    evaluate = _LOADED.get(token)
    if evaluate is None:
        _LOADED.clear()                        # one search's evaluation at a time
        evaluate = _LOADED[token] = pickle.loads(blob)
    return [evaluate(key) for key in keys]


class ClusterEvaluate:
    """`evaluate` with a `many` that spreads a batch over the cluster's workers."""

    def __init__(self, evaluate: Callable[[Key], Result], client: Any, remote: Any,
                 workers: int = 1, token: str = ""):
        self.evaluate, self.client, self.remote, self.token = evaluate, client, remote, token
        self.slices = max(1, SLICES_PER_WORKER * workers)

    def __call__(self, key: Key) -> Result:
        return self.evaluate(key)

    def many(self, keys: Sequence[Key]) -> list[Result]:
        """The batch's answers in the order asked. The module `random` that DEAP draws from
        is restored afterwards: distributed draws from it too (gather's choice of a worker,
        retry jitter) while the search waits, and the seed must give the same front."""
        keys = list(keys)
        if not keys:
            return []
        step = -(-len(keys) // self.slices)        # a task per slice: fewer round trips
        state = random.getstate()
        try:
            futures = self.client.map(_remote, [keys[i:i + step] for i in range(0, len(keys), step)],
                                      blob=self.remote, token=self.token, pure=False)
            return [r for part in self.client.gather(futures) for r in part]
        except InputError:
            raise                                  # the evaluation's own one-line refusal
        except Exception as err:                   # a worker lost (KilledWorker), a comm error
            reason = " ".join(str(err).split())[:200]
            raise InputError(f"--cluster: evaluating on the cluster failed: "
                             f"{type(err).__name__}: {reason}") from None
        finally:
            random.setstate(state)


@contextmanager
def cluster_pool(evaluate: Callable[[Key], Result], address: str) -> Iterator[ClusterEvaluate]:
    """`evaluate` spread over the Dask cluster at `address` for the `with` block."""
    from distributed import Client
    try:
        client = Client(address, timeout=f"{TIMEOUT}s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as err:
        reason = " ".join(str(err).split())[:200] or type(err).__name__
        raise InputError(f"--cluster {address}: no Dask scheduler answered within {TIMEOUT} s "
                         f"({reason})") from None
    try:
        blob = pickle.dumps(evaluate, protocol=pickle.HIGHEST_PROTOCOL)
        remote = client.scatter(blob, broadcast=True, hash=False)
        workers = len(client.scheduler_info().get("workers", {})) or 1
        yield ClusterEvaluate(evaluate, client, remote, workers, uuid.uuid4().hex)
    finally:
        client.close()


@contextmanager
def local_processes(workers: int = 2, start_timeout: float = 60.0) -> Iterator[str]:
    """The address of a scheduler and `workers` one-thread workers started as separate
    processes (`python -m distributed.cli.dask_scheduler` / `dask_worker`), for the block."""
    from distributed import Client
    with tempfile.TemporaryDirectory() as tmp:
        info = Path(tmp) / "scheduler.json"
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler",
                                   "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                   "--scheduler-file", str(info)],
                                  env=WORKER_ENV | dict(os.environ), **quiet)]
        try:
            deadline = time.monotonic() + start_timeout
            while not info.is_file() and time.monotonic() < deadline:
                time.sleep(0.1)
            address = json.loads(info.read_text())["address"]
            procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker",
                                           address, "--nworkers", str(workers), "--nthreads", "1",
                                           "--no-dashboard", "--local-directory", tmp],
                                          env=WORKER_ENV | dict(os.environ), **quiet))
            with Client(address, timeout=f"{TIMEOUT}s", set_as_default=False) as client:
                client.wait_for_workers(workers, timeout=start_timeout)
            yield address
        finally:
            for proc in reversed(procs):
                proc.terminate()
            for proc in procs:
                proc.wait(timeout=30)

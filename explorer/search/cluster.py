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
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from explorer.search.parallel import Key, Result
from sdf3.errors import InputError
from sdf3.parent_death import ENV as PARENT_ENV

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


PLUGIN = "memtrade-evaluation"


def evaluation_plugin(blob: bytes):
    """A Dask worker plugin holding the search's evaluation on every worker: `distributed`
    sends it (the pickled evaluation as bytes) to each worker, present and joining, and calls
    its `setup` there, which unpickles the evaluation once per worker process. Dask keeps a
    worker's plugins by name for the worker's life, so the tasks of a batch find the
    evaluation (and the RunCache it carries, explorer/memory/cache.py) there; registering
    the next search's plugin under the same name replaces it."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class LoadedEvaluation(WorkerPlugin):
        name = PLUGIN

        def __init__(self, blob: bytes):
            self.blob, self.evaluate = blob, None

        def setup(self, worker) -> None:
            self.evaluate = pickle.loads(self.blob)

    return LoadedEvaluation(blob)


def remote_slice(keys: list[Key]) -> list[Result]:
    """On a worker: a slice of a batch, with the evaluation its plugin unpickled. The
    evaluation travels as pickled bytes, not as an object: an evaluation object pickled while
    a task fills its caches fails ("dictionary changed size during iteration"); bytes never
    change."""
    from distributed import get_worker
    evaluate = get_worker().plugins[PLUGIN].evaluate
    return [evaluate(key) for key in keys]


class ClusterEvaluate:
    """`evaluate` with a `many` that spreads a batch over the cluster's workers."""

    def __init__(self, evaluate: Callable[[Key], Result], client: Any, workers: int = 1):
        self.evaluate, self.client = evaluate, client
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
            futures = self.client.map(remote_slice,
                                      [keys[i:i + step] for i in range(0, len(keys), step)],
                                      pure=False)
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
        client.register_plugin(evaluation_plugin(blob), name=PLUGIN)
        workers = len(client.scheduler_info().get("workers", {})) or 1
        yield ClusterEvaluate(evaluate, client, workers)
    finally:
        try:
            client.unregister_worker_plugin(PLUGIN)
        except Exception:          # the scheduler or the plugin is gone: nothing to undo
            pass
        client.close()


@contextmanager
def local_processes(workers: int = 2, start_timeout: float = 60.0) -> Iterator[str]:
    """The address of a scheduler and `workers` one-thread workers started as separate
    processes (`python -m distributed.cli.dask_scheduler` / `dask_worker`), for the block."""
    from distributed import Client
    with tempfile.TemporaryDirectory() as tmp:
        info = Path(tmp) / "scheduler.json"
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        # each started through sdf3/parent_death.py, so it ends with this process
        parent = {PARENT_ENV: str(os.getpid())}
        ends_with_us = [sys.executable, "-m", "sdf3.parent_death"]
        procs = [subprocess.Popen(ends_with_us + ["distributed.cli.dask_scheduler",
                                   "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                   "--scheduler-file", str(info)],
                                  env=WORKER_ENV | dict(os.environ) | parent, **quiet)]
        try:
            address = _scheduler_address(info, time.monotonic() + start_timeout)
            procs.append(subprocess.Popen(ends_with_us + ["distributed.cli.dask_worker",
                                           address, "--nworkers", str(workers), "--nthreads", "1",
                                           "--no-dashboard", "--local-directory", tmp],
                                          env=WORKER_ENV | dict(os.environ) | parent, **quiet))
            with Client(address, timeout=f"{TIMEOUT}s", set_as_default=False) as client:
                client.wait_for_workers(workers, timeout=start_timeout)
            yield address
        finally:
            # the workers first, while their scheduler still answers: a worker process whose
            # scheduler is gone waits out its reconnection (8.4 s measured, against 1.0 s)
            for proc in reversed(procs):
                proc.terminate()
                proc.wait(timeout=30)


def _scheduler_address(info: Path, deadline: float) -> str:
    """The address in the scheduler's `--scheduler-file`, once the file is whole: the
    scheduler creates it before writing it, so a read in between finds it empty."""
    while True:
        try:
            return json.loads(info.read_text())["address"]
        except (OSError, ValueError, KeyError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)

"""Chromosomes evaluated in worker processes: DEAP's documented way to spread a search's
evaluations (`toolbox.register("map", pool.map)` over a `multiprocessing.Pool`), kept to the
search's batches so the results stay those of the serial run.

NSGA-II hands over, per generation, the chromosomes it has not met before
(explorer.search.nsga2); each worker derives some of them (explorer.plan.derive.Evaluation: row
replay, schedules, placement) and `Pool.map` returns the answers in the order asked, so the
front, the cache and every count are the ones a single process gets: an evaluation is a
pure function of its genes (its explorer.memory.cache.RunCache only saves work). Workers are forked, so they start with the parent's application, profile and
caches without pickling them; where `fork` is not offered, or one worker is asked for, the
evaluations run in this process.
"""
from __future__ import annotations

import gc
import multiprocessing
import os
import signal
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

from explorer.search.problem import Key, Result, as_batch
from sdf3.parent_death import die_with_parent

MAX_WORKERS = 8            # beyond this a generation's batch (~30 new chromosomes) is too short

_EVALUATE: Callable[[Key], Result] | None = None      # the workers' evaluate, set before fork


def usable_cpus() -> int:
    """CPUs this process may run on (the affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                 # not on Linux
        return os.cpu_count() or 1


def resolve_workers(workers: int) -> int:
    """0 = one per usable CPU (at most MAX_WORKERS); otherwise the number asked for."""
    return min(usable_cpus(), MAX_WORKERS) if workers == 0 else workers


class Mapped:
    """`evaluate` after translating each chromosome (the binary stage of a ladder search
    evaluates a binary chromosome as its ladder twin), batches included."""

    def __init__(self, evaluate: Callable[[Key], Result], translate: Callable[[Key], Key]):
        self.evaluate, self.translate = evaluate, translate

    def __call__(self, key: Key) -> Result:
        return self.evaluate(self.translate(key))

    def many(self, keys: Sequence[Key]) -> list[Result]:
        return as_batch(self.evaluate).many([self.translate(k) for k in keys])


WORKER_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _quiet_worker(parent: int | None = None) -> None:
    """Ctrl-C is the parent's to handle (it stops the pool); workers would each print a
    traceback otherwise. SIGTERM ends a worker at once (the default: the parent's handler,
    inherited by fork, would raise in the worker). Both arrive blocked (evaluation_pool forks
    with them blocked) and are unblocked only once these are set: a SIGTERM sent by the
    pool's terminate before then (a search that ends at once) waits and then ends the
    worker, where it would otherwise reach the parent's handler, be dropped, and leave the
    parent joining a worker that never ends. A worker ends with its parent, silently, even
    when the parent is killed outright (sdf3/parent_death.py)."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, WORKER_SIGNALS)


def _work(key: Key) -> Result:
    assert _EVALUATE is not None
    return _EVALUATE(key)


class PoolEvaluate:
    """`evaluate` with a `many` that splits a batch over the pool's workers."""

    def __init__(self, evaluate: Callable[[Key], Result], pool):
        self.evaluate, self.pool = evaluate, pool

    def __call__(self, key: Key) -> Result:
        return self.evaluate(key)

    def many(self, keys: Sequence[Key]) -> list[Result]:
        keys = list(keys)
        if len(keys) < 2:
            return [self.evaluate(k) for k in keys]
        # one chromosome per task: a derivation takes milliseconds, a task's round trip
        # far less, and a generation's batch is short, so balance beats batching
        return self.pool.map(_work, keys, chunksize=1)


@contextmanager
def evaluation_pool(evaluate: Callable[[Key], Result], workers: int) -> Iterator:
    """`evaluate`, spread over `workers` forked processes for the `with` block (0: one per
    usable CPU); `evaluate` itself when that is one worker or fork is not offered."""
    global _EVALUATE
    n = resolve_workers(workers)
    if n < 2 or "fork" not in multiprocessing.get_all_start_methods():
        yield evaluate
        return
    _EVALUATE = evaluate
    # what the parent holds stays out of the workers' garbage collection: a forked child
    # collecting an ONNX Runtime session the parent made (a test, a `platform: cpu` profile
    # measured in this process) crashed in its finalizer, and the pool then waited forever
    gc.collect()
    gc.freeze()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, WORKER_SIGNALS)   # see _quiet_worker
    try:
        pool = multiprocessing.get_context("fork").Pool(n, initializer=_quiet_worker,
                                                        initargs=(os.getpid(),))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        gc.unfreeze()
    try:
        yield PoolEvaluate(evaluate, pool)
    finally:
        pool.terminate()
        pool.join()
        _EVALUATE = None

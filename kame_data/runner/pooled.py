"""A pure, CPU-bound step in worker processes, so no such stage is bound to one core.

A step whose `resources.processes` is set (quality, acoustics) is wrapped by the local executor's
runner: each worker process builds its own copy of the step from (class, config, seed), sets it up
once, and runs single records; the parent keeps checkpoints, order and counts (docs/design.md, "The
step contract"). Results are the step's own, whatever the number of workers: the step is a pure
function of the record, its config and the seed, and each copy keeps its native libraries to one
thread. A worker that dies is reported like a native engine crash, with the records it held.
"""

from __future__ import annotations

import os
import weakref
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from kame_data import costs
from kame_data.step import Resources, RunContext, Step
from kame_data.workers import EngineCrashed, describe_death, pool_cpu_seconds, worker_pool

_STEP: Step | None = None  # the worker process's own copy of the step


def _init(cls: type[Step], config: Any, seed: int) -> None:
    global _STEP
    _STEP = cls(config, RunContext(seed=seed))
    _STEP.setup()


def _run(record: Any) -> list[Any]:
    assert _STEP is not None, "the pool's initializer builds the step"
    try:
        return _STEP.run([record])[0]
    finally:
        costs.flush()  # a spawned worker may be stopped without running atexit


class PooledStep(Step):
    """`inner` run record by record in `workers` processes; the same name, identity and outputs."""

    def __init__(self, inner: Step, workers: int):
        super().__init__(inner.config, inner.context)
        self.inner, self.workers = inner, workers
        self.name = inner.name  # type: ignore[misc] - per instance: the wrapped step's name
        self._pool = None

    @property
    def resources(self) -> Resources:
        own = self.inner.resources
        return Resources(cpus=float(self.workers), concurrent_batches=self.workers, checkpoint=own.checkpoint)

    def identity(self) -> dict[str, Any]:
        return self.inner.identity()

    def setup(self) -> None:
        if self._pool is None:
            self._pool = worker_pool(self.workers, _init, (type(self.inner), self.inner.config, self.inner.seed))
            weakref.finalize(self, self._pool.shutdown, wait=True, cancel_futures=True)

    def run(self, batch: list[Any]) -> list[list[Any]]:
        assert self._pool is not None, "the executor calls setup() before run()"
        futures = [self._pool.submit(_run, r) for r in batch]
        try:
            return [f.result() for f in futures]
        except BrokenProcessPool:
            crashed = EngineCrashed(f"{self.name} step", describe_death(self._pool),
                                    [r.id for r, f in zip(batch, futures) if not f.done() or f.exception()])
            self.teardown()
            raise crashed from None

    def teardown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self.inner.teardown()

    def summary(self) -> dict[str, Any]:
        return self.inner.summary()

    def worker_cpu_seconds(self) -> float | None:
        return pool_cpu_seconds(self._pool)


def pooled(steps: list[Step], workers: int | None = None) -> list[Step]:
    """`steps` with each one that asks for processes wrapped in a pool of `workers` (default: one
    per core); on one core, or for other steps, the step itself."""
    n = workers or len(os.sched_getaffinity(0)) or 1
    return [PooledStep(s, n) if n > 1 and s.resources.processes else s for s in steps]

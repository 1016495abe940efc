"""The CPU a step's worker processes use, as the manifest's `cpu` reports it (kame_data/workers.py)."""

from __future__ import annotations

import os
import sys
import time

import pytest

from kame_data.workers import pool_cpu_seconds, process_cpu_seconds, worker_pool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _burn(n: int) -> float:
    """A fixed amount of work; the CPU seconds it took in this worker."""
    started = time.process_time()
    total = 0
    for i in range(n):
        total += i * i % 7
    return time.process_time() - started


def test_a_pool_counts_every_workers_cpu_and_keeps_it_after_they_end():
    pool = worker_pool(2)
    try:
        spent = sum(pool.map(_burn, [2_000_000] * 4))
        used = pool_cpu_seconds(pool)
        # every task's own CPU, plus each worker's start-up (imports): never less
        assert used is not None and used >= spent * 0.95 and spent > 0.05
    finally:
        pool.shutdown(wait=True)
    assert pool_cpu_seconds(pool) == pytest.approx(used, abs=0.5)  # the last reading of ended workers stays
    assert pool_cpu_seconds(None) is None


def test_process_cpu_of_this_process_and_of_no_process():
    mine = process_cpu_seconds(os.getpid())
    assert mine is not None and mine <= time.process_time() + 0.05
    assert process_cpu_seconds(2 ** 22 + 12345) is None  # beyond pid_max: no such process


class _Busy:
    """A step computed in the driver: a sleep (no CPU) and then a fixed amount of work per record."""

    name = "busy"

    class resources:  # noqa: N801 - the attributes apply_step reads
        checkpoint = False

    def setup(self) -> None:
        pass

    def run(self, batch):
        out = []
        for r in batch:
            time.sleep(0.2)
            out.append([_burn(300_000) and r])
        return out


def test_a_driver_side_step_counts_its_threads_cpu_not_its_waits():
    """A step without worker processes is measured by the CPU of the thread that ran its batch: the
    manifest's `cpu` then holds its cost, not the time it waited (here: for a sleep; in a run: for a
    core other steps hold)."""
    from kame_data.runner.checkpoint import Keyed
    from kame_data.runner.executor import apply_step

    step = _Busy()
    records = [Keyed(str(i), f"r{i}") for i in range(3)]
    started = time.thread_time()
    out, counts = apply_step(step, "busy", records, None)
    spent = time.thread_time() - started
    assert [k.record for k in out] == ["r0", "r1", "r2"]
    assert counts.seconds >= 0.6 > counts.cpu  # three sleeps in the wall time, none in the CPU
    assert 0 < counts.cpu <= spent + 1e-3

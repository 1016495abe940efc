"""A crashed engine worker is named by the signal that ended it, even when the pool's own manager
thread reaps the process first (the race behind a CI run that said only "its worker process died")."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from concurrent.futures.process import BrokenProcessPool
from types import SimpleNamespace

import pytest

from kame_data.workers import describe_death, worker_pool


def _segfault() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def test_a_crashed_pool_worker_is_named_by_its_signal():
    pool = worker_pool(1)
    try:
        with pytest.raises(BrokenProcessPool):
            pool.submit(_segfault).result(timeout=120)
        assert describe_death(pool) == "SIGSEGV"
    finally:
        pool.shutdown(wait=True)


def test_the_signal_is_named_when_another_thread_reaped_the_worker_first():
    proc = multiprocessing.get_context("spawn").Process(target=_segfault)
    proc.start()
    multiprocessing.connection.wait([proc.sentinel])
    _, status = os.waitpid(proc.pid, 0)  # reaped behind the Process object's back, as the executor does
    record = threading.Timer(0.2, setattr, (proc._popen, "returncode", os.waitstatus_to_exitcode(status)))
    record.start()
    try:
        assert describe_death(SimpleNamespace(started={proc.pid: proc}, _processes=None)) == "SIGSEGV"
    finally:
        record.join()

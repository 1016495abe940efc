"""Worker processes for native engines (TTS, Whisper, llama.cpp).

Engines written in C/C++ can crash the process they run in. They run in worker processes so that
a crash is contained: the parent survives, names the engine and the item, and everything already
finished stays checkpointed. Workers also end with their parent: after a crash or a SIGKILL of the
main process no worker is left running.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable

from kame_data.errors import RunAbort

# The runner points this at OUT/run.log, so a worker's native crash leaves its Python stack there.
FAULT_LOG_ENV = "KAME_DATA_FAULT_LOG"
DOCTOR_ADVICE = "run `kame-data doctor` to check this machine's engines"


class EngineCrashed(RunAbort):
    """A native engine killed its worker process (e.g. SIGSEGV, SIGILL)."""

    def __init__(self, engine: str, how: str, items: list[str] | None = None):
        self.engine, self.how, self.items = engine, how, list(items or [])
        where = ""
        if self.items:
            shown = ", ".join(self.items[:3]) + (f" (+{len(self.items) - 3} more)" if len(self.items) > 3 else "")
            where = f" on {'item' if len(self.items) == 1 else 'one of the items'} {shown}"
        super().__init__(f"{engine} crashed ({how}){where}; {DOCTOR_ADVICE}")

    def __reduce__(self):  # picklable across processes (Ray actors) with its fields
        return (EngineCrashed, (self.engine, self.how, self.items))

    def on_items(self, items: list[str]) -> "EngineCrashed":
        """The same crash, told with the items the caller was working on."""
        return EngineCrashed(self.engine, self.how, items)


def _watch_parent(parent: int, interval: float) -> None:
    while True:
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)  # the parent is gone: nobody will read our results
        threading.Event().wait(interval)


def watch_parent(interval: float = 0.25) -> None:
    """End this process within `interval` seconds of its parent's death, however the parent died.
    (PR_SET_PDEATHSIG would fire when the *thread* that spawned us ends, which pools do not
    guarantee; polling the parent id does not have that trap.)"""
    threading.Thread(target=_watch_parent, args=(os.getppid(), interval), daemon=True,
                     name="kame-data-parent-watch").start()


def _fault_log() -> None:
    path = os.environ.get(FAULT_LOG_ENV)
    if path:
        try:
            fh = open(path, "a", encoding="utf-8")  # kept open for the life of the worker
        except OSError:
            fh = sys.stderr
    else:
        fh = sys.stderr
    faulthandler.enable(file=fh, all_threads=True)


def _init(initializer: Callable[..., Any] | None, args: tuple) -> None:
    watch_parent()
    _fault_log()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if initializer is not None:
        initializer(*args)


def worker_pool(workers: int, initializer: Callable[..., Any] | None = None,
                initargs: tuple = ()) -> ProcessPoolExecutor:
    """A spawn-context process pool whose workers die with their parent and log native crashes.
    spawn, not fork: the parent may already run threads (llama.cpp, onnxruntime) that fork copies badly."""
    return _Pool(workers, mp_context=multiprocessing.get_context("spawn"),
                 initializer=_init, initargs=(initializer, initargs))


class _Pool(ProcessPoolExecutor):
    """Remembers every worker process it started: a broken pool drops its processes from its own
    table, and the one that crashed must still be found to name the crash."""

    def _spawn_process(self):  # noqa: D401 - extends the executor's own
        super()._spawn_process()
        seen = self.__dict__.setdefault("started", {})
        seen.update(getattr(self, "_processes", None) or {})

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system, every thread) its workers have used so far; a worker that has
        ended counts with its last reading. None where the system does not tell (no /proc)."""
        last = self.__dict__.setdefault("cpu_seen", {})
        for pid, proc in list(getattr(self, "started", {}).items()):
            if _dead(proc):
                continue  # its last reading stands (and its pid may be another process's by now)
            used = process_cpu_seconds(pid)
            if used is not None:
                last[pid] = max(used, last.get(pid, 0.0))
        return sum(last.values()) if last else None


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a live process, from /proc (Linux); None elsewhere or once gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def pool_cpu_seconds(pool: ProcessPoolExecutor | None) -> float | None:
    """`_Pool.cpu_seconds` of a pool from `worker_pool`; None for no pool."""
    return pool.cpu_seconds() if isinstance(pool, _Pool) else None


def _exit_code(proc: Any, wait: float = 2.0) -> int | None:
    """The process's exit code, or None while it runs. The executor's manager thread joins the same
    processes when the pool breaks: if it reaps one first, our own waitpid fails (ECHILD) and
    reads None until that thread records the code, so a dead process is asked again briefly."""
    deadline = time.monotonic() + wait
    try:
        proc.join(min(wait, 1.0))
    except Exception:  # noqa: BLE001 - best effort: the pool is already broken
        return None
    code = proc.exitcode
    while code is None and time.monotonic() < deadline and _dead(proc):
        time.sleep(0.02)
        code = proc.exitcode
    return code


def _dead(proc: Any) -> bool:
    """Whether the process has ended, from its sentinel (readable once it exits), not waitpid."""
    try:
        return bool(multiprocessing.connection.wait([proc.sentinel], 0))
    except (OSError, ValueError):
        return False


def describe_death(pool: ProcessPoolExecutor) -> str:
    """How a broken pool's workers ended ("SIGSEGV", "exit code 1"), for error messages."""
    codes = []
    procs = {**getattr(pool, "started", {}), **(getattr(pool, "_processes", None) or {})}
    for proc in list(procs.values()):
        code = _exit_code(proc)
        if code is None or code == 0:
            continue
        if code < 0:
            try:
                codes.append(signal.Signals(-code).name)
            except ValueError:
                codes.append(f"signal {-code}")
        else:
            codes.append(f"exit code {code}")
    # The first crash is the cause; the others are the pool terminating its remaining workers.
    crashes = [c for c in codes if c not in ("SIGTERM", "SIGKILL")] or codes
    return crashes[0] if crashes else "its worker process died"

"""CPU seconds per piece of the speech path (engine, Whisper, pauses, mixing, DNSMOS, VAD, …), for
`benchmarks/speech_cost.py`. Off, and free, unless the environment variable KAME_DATA_COSTS names
a folder: then each process adds up its pieces and keeps them in `<folder>/costs-<pid>.json`
(rewritten atomically as it goes, so a worker killed at shutdown loses at most its last second).

`piece(name)` measures the CPU time of the calling thread (`time.thread_time`), right for a step
running beside others in one process; `piece(name, whole_process=True)` measures the process
(`time.process_time`), needed where a native library computes on threads of its own (Whisper's
CTranslate2 pool) and only right where the process does nothing else meanwhile (a speak worker).
Pieces may nest; a nested piece's time is also in its parent's.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ENV = "KAME_DATA_COSTS"
_FLUSH_EVERY = 1.0  # seconds of wall time between rewrites of the process's file

_totals: dict[str, float] = defaultdict(float)
_counts: dict[str, int] = defaultdict(int)
_lock = threading.Lock()
_last_flush = 0.0
_pid = os.getpid()  # a forked child starts its own totals (speak workers are spawned, but be safe)


def enabled() -> bool:
    return bool(os.environ.get(ENV))


@contextmanager
def piece(name: str, whole_process: bool = False) -> Iterator[None]:
    if not enabled():
        yield
        return
    global _pid
    if os.getpid() != _pid:
        with _lock:
            _pid = os.getpid()
            _totals.clear()
            _counts.clear()
    clock = time.process_time if whole_process else time.thread_time
    started = clock()
    try:
        yield
    finally:
        spent = clock() - started
        with _lock:
            _totals[name] += spent
            _counts[name] += 1
        _maybe_flush()


def _maybe_flush() -> None:
    global _last_flush
    now = time.monotonic()
    if now - _last_flush >= _FLUSH_EVERY:
        _last_flush = now
        flush()


def flush() -> None:
    """Write this process's totals (no-op when off)."""
    folder = os.environ.get(ENV)
    if not folder:
        return
    with _lock:
        data = {"pid": os.getpid(), "cpu_s": dict(_totals), "calls": dict(_counts),
                "process_cpu_s": time.process_time()}
    path = Path(folder) / f"costs-{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data), "utf-8")
    os.replace(tmp, path)


def read(folder: str | os.PathLike) -> dict[str, float]:
    """Every process's pieces in `folder`, summed."""
    out: dict[str, float] = defaultdict(float)
    for p in Path(folder).glob("costs-*.json"):
        for k, v in json.loads(p.read_text("utf-8"))["cpu_s"].items():
            out[k] += v
    return dict(out)


def process_cpu(folder: str | os.PathLike, pid: int) -> float | None:
    """The whole CPU time (`time.process_time`) of process `pid`, as it last recorded it in `folder`."""
    path = Path(folder) / f"costs-{pid}.json"
    return json.loads(path.read_text("utf-8")).get("process_cpu_s") if path.is_file() else None


atexit.register(flush)

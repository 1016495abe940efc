"""Live retries and waits of the LLM backends in this process, so that a run waiting on a service
is never silent: a backend reports each retry as its wait begins (with the item it is for), when an
item's trouble ends, and a backend-wide pause as it begins and ends; whoever shows the run's
progress (runner/progress.py writes them to progress.json, which `kame-data status` prints)
watches the reports. Watchers are held weakly: a finished run's progress goes away with it.

Under the Ray executor the backends run in worker processes, whose reports stay there; their
warnings reach the driver's console through Ray's log forwarding."""

from __future__ import annotations

import logging
import threading
import weakref
from dataclasses import dataclass
from typing import Callable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Retry:
    """A failed attempt that will be tried again once `wait_s` seconds have passed."""

    error: str  # why the attempt failed: rate_limited, timeout, http_500, connection_error, ...
    wait_s: float  # how long the request waits before its next attempt
    asked_s: float | None = None  # the server's Retry-After, when it sent one
    capped: bool = False  # the server asked for more than max_retry_after: waiting that instead
    item: str = ""  # the item (dialogue) the request is for
    detail: str = ""  # the server's words for the failure, scrubbed


@dataclass(frozen=True)
class ItemSettled:
    """An item's requests no longer wait: answered again, or given up (its stage rejects it)."""

    item: str


@dataclass(frozen=True)
class Paused:
    """The whole backend holds its requests until `until` (epoch seconds; 0: sending resumed)."""

    until: float
    reason: str = ""


Event = Retry | ItemSettled | Paused


_watchers: list[weakref.WeakMethod] = []
_lock = threading.Lock()
_broken: set[int] = set()  # watchers whose failure was logged once already


def watch(method: Callable[[Event], None]) -> None:
    """Have `method` (a bound method, held weakly) called on every event any backend reports."""
    with _lock:
        _watchers.append(weakref.WeakMethod(method))


def report(retry: Event) -> None:
    """Tell every live watcher (from the backend's thread: watchers keep their own locks)."""
    with _lock:
        _watchers[:] = [w for w in _watchers if w() is not None]
        live = list(_watchers)
    for ref in live:
        method = ref()
        if method is None:
            continue
        try:
            method(retry)
        except Exception as e:  # noqa: BLE001 - showing progress must never fail a request
            if id(ref) not in _broken:
                _broken.add(id(ref))
                log.warning("could not show LLM retries in the run's progress: %s: %s", type(e).__name__, e)

"""Client-side limits for remote LLM APIs: rate limits, backoff with jitter, failure streaks."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
import time
from email.utils import parsedate_to_datetime

from kame_data.errors import RunAbort


class BackendUnavailable(RunAbort):
    """Too many consecutive failures: the service is down or misconfigured; the run aborts."""


class PriorityGate:
    """A bounded window of requests in flight that admits the lowest priority first (FIFO among
    equals), where asyncio's Semaphore admits in arrival order.

    The OpenAI backend ranks each request by the order its dialogue was first seen, so the
    dialogues that came first are answered first: a run cut short (a budget, an outage) leaves
    finished dialogues rather than every dialogue half asked, and they reach the writer sooner."""

    def __init__(self, capacity: int):
        self._free = capacity
        self._waiting: list[tuple[tuple, int, asyncio.Future]] = []
        self._order = itertools.count()

    async def acquire(self, priority: tuple = ()) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (priority, next(self._order), fut))
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release()  # admitted and cancelled in the same step: hand the slot on
            else:
                self._waiting = [w for w in self._waiting if w[2] is not fut]
                heapq.heapify(self._waiting)
            raise

    def release(self) -> None:
        while self._waiting:
            _, _, fut = heapq.heappop(self._waiting)
            if not fut.done():
                fut.set_result(None)  # the slot passes straight to the waiter
                return
        self._free += 1

    def slot(self, priority: tuple = ()) -> "_Slot":
        return _Slot(self, priority)


class _Slot:
    def __init__(self, gate: PriorityGate, priority: tuple):
        self.gate, self.priority = gate, priority

    async def __aenter__(self) -> None:
        await self.gate.acquire(self.priority)

    async def __aexit__(self, *exc) -> None:
        self.gate.release()


class RateLimiter:
    """Token buckets for requests per minute and tokens per minute (either may be None).

    Each bucket holds one second's worth, so bursts stay within what a per-minute limit
    enforced over short windows tolerates."""

    def __init__(self, rpm: float | None = None, tpm: float | None = None):
        self.rpm, self.tpm = rpm, tpm
        now = time.monotonic()
        self._req = [self._capacity(rpm), now]
        self._tok = [self._capacity(tpm), now]
        self._lock = asyncio.Lock()

    @staticmethod
    def _capacity(per_minute: float | None) -> float:
        return max(1.0, float(per_minute or 0) / 60.0)

    def _wait(self, bucket: list[float], per_minute: float, need: float) -> float:
        now = time.monotonic()
        cap = self._capacity(per_minute)
        need = min(need, cap)
        bucket[0] = min(cap, bucket[0] + (now - bucket[1]) * per_minute / 60.0)
        bucket[1] = now
        if bucket[0] >= need:
            bucket[0] -= need
            return 0.0
        return (need - bucket[0]) * 60.0 / per_minute

    async def acquire(self, tokens: int = 0) -> None:
        async with self._lock:
            while True:
                wait = 0.0
                if self.rpm:
                    wait = max(wait, self._wait(self._req, self.rpm, 1.0))
                if self.tpm and wait == 0.0:
                    wait = max(wait, self._wait(self._tok, self.tpm, float(tokens)))
                    if wait and self.rpm:
                        self._req[0] += 1.0  # give the request slot back; we try again after the wait
                if wait == 0.0:
                    return
                await asyncio.sleep(wait)


def backoff_delay(attempt: int, base: float, cap: float, retry_after: float | None = None,
                  rng: random.Random | None = None) -> float:
    """Full-jitter exponential backoff; a server's Retry-After is honoured as the minimum."""
    rng = rng or random
    delay = rng.uniform(0, min(cap, base * (2 ** attempt)))
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: a number of seconds, or an HTTP date (RFC 9110)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None

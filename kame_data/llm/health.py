"""Whose fault is a failed LLM request: the item's, or the service's (docs/concepts/simulator-llm.md, "When the LLM
service misbehaves"; docs/design.md, "Rules every part keeps").

One bad item (a prompt the server chokes on, a dialogue a proxy trickles, a 429 that only its
requests get) must cost that item, never the run, while a service that is really down must stop
the run rather than reject every item one by one. `ServiceHealth` keeps, for one backend:

- **Per item**, its trouble: when its first failed attempt began, the last failure and the
  server's words for it. An item's requests together get `item_deadline` seconds from then
  (attempts, backoff and Retry-After waits; a backend-wide pause does not count, being nobody's
  item). Past it, or when the next wait would end past it, the item *gives up*: every request of
  it returns the same failure, and its stage makes it a transient reject that the next run retries.
- **For the service**, an outage: requests of at least `outage_items` distinct items failed and
  none was answered for `outage_after` seconds. Then the run stops (BackendUnavailable) and
  publishes what it finished. Answers from other items in between mean the service is up: one item
  failing for ever never trips it, and the last item of a run alone never can (two items at least).
- **A rate limit**: 429s with Retry-After for requests of two distinct items with no answer in
  between pause the whole backend once for the time asked (capped by `max_retry_after`); when the
  pause ends one request goes first (the probe) and the rest follow only when it is answered. A
  429 met during the pause is the backend's, not a retry of the request's.

Used on the backend's event loop thread only, so it keeps no locks. `clock` is injectable for tests.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from kame_data.llm.limits import BackendUnavailable

RATE_LIMITED = "rate_limited"


def outage_items_for(concurrency: int) -> int:
    """Distinct failing items that, with no answer for `outage_after`, make an outage: a quarter
    of the requests in flight, between 2 (one item alone is never the service) and 4 (at high
    concurrency an outage fails every item in flight at once, so four are no wait at all)."""
    return max(2, min(4, concurrency // 4))


@dataclass
class Trouble:
    """One item's failed attempts since its requests were first sent in this call."""

    first: float  # clock when its first failed attempt began
    pause_mark: float  # the backend's paused seconds at that moment (excluded from its deadline)
    error: str = ""  # the last failure: rate_limited, timeout, http_500, connection_error, bad_response
    said: str = ""  # the server's words for it, scrubbed
    failures: int = 0
    gave_up: str = ""  # once it gave up: the detail every request of it returns


@dataclass
class _Item:
    refs: int = 0  # calls of `complete` holding requests of this item
    trouble: Trouble | None = None


@dataclass
class ServiceHealth:
    item_deadline: float
    outage_after: float
    outage_items: int
    where: str  # the service, for messages
    clock: Callable[[], float] = time.monotonic
    items: dict[str, _Item] = field(default_factory=dict)
    tripped: str = ""  # set once an outage was declared: every later request raises it
    # The failure streak: items with a failed attempt since the last answer, and when it began.
    _failing: set[str] = field(default_factory=set)
    _streak_since: float | None = None
    _limited: set[str] = field(default_factory=set)  # items that met a 429 with Retry-After since then
    # The backend-wide pause: until when, since when (None: no pause episode), seconds paused before.
    pause_until: float = 0.0
    _episode_since: float | None = None
    _paused_before: float = 0.0
    pauses: int = 0  # pause episodes begun (for the manifest)

    # Items come and go with the calls of `complete` that hold their requests.
    def open(self, item: str) -> None:
        self.items.setdefault(item, _Item()).refs += 1

    def close(self, item: str) -> Trouble | None:
        """The call is done with `item`; its trouble, when the last holder lets go."""
        it = self.items.get(item)
        if it is None:
            return None
        it.refs -= 1
        if it.refs > 0:
            return None
        del self.items[item]
        return it.trouble

    # The service's health.
    def answered(self, item: str) -> bool:
        """A request was answered (or refused: the service is up). True when this ends a pause."""
        self._failing.clear()
        self._limited.clear()
        self._streak_since = None
        it = self.items.get(item)
        if it is not None and it.trouble is not None and not it.trouble.gave_up:
            it.trouble = None  # its requests get through again: its clock starts afresh next time
        return self._end_pause()

    def failed(self, item: str, error: str, said: str, started: float, retry_after: float | None = None,
               max_retry_after: float = math.inf) -> bool:
        """An attempt that began at `started` failed. Raises BackendUnavailable when this makes an
        outage. True when the failure belongs to a backend-wide rate-limit pause (not a retry the
        request counts)."""
        now = self.clock()
        trouble = self._trouble(item, started)
        trouble.error, trouble.said, trouble.failures = error, said, trouble.failures + 1
        self._failing.add(item)
        if self._streak_since is None:
            self._streak_since = started
        paused = False
        if error == RATE_LIMITED and retry_after is not None:
            self._limited.add(item)
            if self._episode_since is not None or len(self._limited) >= 2:
                if retry_after > self.outage_after and len(self._limited) >= 2:
                    self.trip(f"{self.where} asks every request to wait {retry_after:.0f} s (HTTP 429, "
                              f"Retry-After), longer than outage_after ({self.outage_after:.0f} s)")
                if self._episode_since is None:
                    self._episode_since = now
                    self.pauses += 1
                self.pause_until = max(self.pause_until, now + min(retry_after, max_retry_after))
                paused = True
        self.check(now)
        return paused

    def check(self, now: float | None = None) -> None:
        """Raise BackendUnavailable if the failure streak has become an outage."""
        if self.tripped:
            raise BackendUnavailable(self.tripped)
        now = self.clock() if now is None else now
        if (self._streak_since is not None and len(self._failing) >= self.outage_items
                and now - self._streak_since >= self.outage_after):
            self.trip(f"{self.where} answered no request for {now - self._streak_since:.0f} s while requests of "
                      f"{len(self._failing)} dialogues failed (outage_after {self.outage_after:g} s; last: "
                      f"{self._last_error()})")

    def trip(self, why: str) -> None:
        self.tripped = why
        raise BackendUnavailable(why)

    def _last_error(self) -> str:
        errors = [it.trouble for k, it in self.items.items() if k in self._failing and it.trouble]
        return errors[-1].error if errors else "?"

    # One item's deadline.
    def _trouble(self, item: str, started: float) -> Trouble:
        it = self.items.setdefault(item, _Item(refs=1))
        if it.trouble is None:
            it.trouble = Trouble(first=started, pause_mark=self.paused_total(started))
        elif started < it.trouble.first:
            it.trouble.first = started
        return it.trouble

    def left(self, item: str) -> float:
        """Seconds the item's requests may still spend (inf when none of them failed yet)."""
        it = self.items.get(item)
        if it is None or it.trouble is None:
            return math.inf
        t, now = it.trouble, self.clock()
        spent = (now - t.first) - (self.paused_total(now) - t.pause_mark)
        return self.item_deadline - spent

    def give_up(self, item: str, why: str) -> Trouble:
        """The item stops asking: `why` with its last failure becomes the detail of every request."""
        it = self.items.setdefault(item, _Item(refs=1))
        if it.trouble is None:
            it.trouble = Trouble(first=self.clock(), pause_mark=self.paused_total())
        t = it.trouble
        if not t.gave_up:
            said = f" ({t.said})" if t.said else ""
            t.gave_up = f"{t.error or 'failed'}{said}; {why}"
        return t

    def given_up(self, item: str) -> Trouble | None:
        it = self.items.get(item)
        return it.trouble if it is not None and it.trouble is not None and it.trouble.gave_up else None

    def trouble(self, item: str) -> Trouble | None:
        it = self.items.get(item)
        return None if it is None else it.trouble

    # The backend-wide pause.
    @property
    def pausing(self) -> bool:
        return self._episode_since is not None

    def pause_left(self) -> float:
        return max(0.0, self.pause_until - self.clock()) if self.pausing else 0.0

    def paused_total(self, now: float | None = None) -> float:
        """Seconds spent in pause episodes so far (the current one up to `now`)."""
        now = self.clock() if now is None else now
        current = max(0.0, now - self._episode_since) if self._episode_since is not None else 0.0
        return self._paused_before + current

    def end_pause(self) -> bool:
        """The probe met something other than a rate limit: sending resumes. True if one ended."""
        return self._end_pause()

    def _end_pause(self) -> bool:
        if self._episode_since is None:
            return False
        self._paused_before = self.paused_total()
        self._episode_since = None
        self.pause_until = 0.0
        return True

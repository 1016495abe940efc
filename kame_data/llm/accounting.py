"""Token and cost accounting, and the budget that stops a run cleanly and exactly.

One `Meter` per run holds the budget, what was spent and what is reserved for requests in flight;
every LLM call of the run (script rewrites, oracle predictions) draws on it through its stage's
`Account`, at that stage's prices. A request reserves its worst-case cost before it is sent and
settles at the cost the server reports, so the spend never passes the budget however many requests
are in flight. Money is counted in integer nano-dollars, rounded up, so sums never drift below the
true cost.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from kame_data.errors import RunAbort

NANO = 1_000_000_000  # nano-dollars per dollar


class BudgetExceeded(RunAbort):
    """The run's LLM budget is spent; what was done so far is kept and published."""


@dataclass(frozen=True)
class Prices:
    """US dollars per million tokens."""

    prompt_per_million: float = 0.0
    completion_per_million: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.prompt_per_million + completion_tokens * self.completion_per_million) / 1e6

    def nano(self, prompt_tokens: int, completion_tokens: int) -> int:
        """The cost in nano-dollars, rounded up."""
        return math.ceil(prompt_tokens * self.prompt_per_million * 1e3
                         + completion_tokens * self.completion_per_million * 1e3)


def prompt_token_bound(messages: tuple[tuple[str, str], ...]) -> int:
    """An upper bound on a chat prompt's tokens without its tokenizer: byte-level tokenizers never
    make more tokens than UTF-8 bytes, plus the chat template's few tokens per message."""
    return sum(len(c.encode("utf-8")) + len(r) + 8 for r, c in messages) + 16


OK, WAIT, STOP = "ok", "wait", "stop"


class Meter:
    """The run's money: budget, spent and reserved. Thread-safe; under Ray one lives in an actor
    that every process's accounts call (see runner/ray_executor.py)."""

    def __init__(self, budget_usd: float | None = None):
        self.budget_usd = budget_usd
        self._budget = None if budget_usd is None else math.floor(budget_usd * NANO)
        self.spent = 0  # nano-dollars settled
        self.reserved = 0  # nano-dollars held by requests in flight
        self.stopped = ""  # why the budget refused a request; once set, it refuses every later one
        self._lock = threading.Lock()

    def reserve(self, nano: int) -> str:
        """OK (held), WAIT (does not fit while others are in flight: their settling may free
        enough) or STOP (does not fit with nothing in flight: the budget is spent)."""
        with self._lock:
            if self.stopped:
                return STOP
            if self._budget is None or self.spent + self.reserved + nano <= self._budget:
                self.reserved += nano
                return OK
            if self.reserved > 0:
                return WAIT
            self.stopped = (f"LLM budget of ${self.budget_usd:.4f} reached: ${self.spent / NANO:.4f} spent, the next "
                            f"request may cost up to ${nano / NANO:.6f}")
            return STOP

    def settle(self, reserved: int, spent: int) -> None:
        """A request came back: its reservation is released and its actual cost spent."""
        with self._lock:
            self.reserved -= reserved
            self.spent += spent

    def reason(self) -> str:
        return self.stopped

    def spent_usd(self) -> float:
        return self.spent / NANO

    def account(self, prices: Prices | None = None) -> "Account":
        return Account(self, prices)


class Account:
    """One stage's use of the run's meter, at its backend's prices; counts what it was paid for
    (cache hits are free). `meter` is a Meter or any object with its reserve/settle/reason methods."""

    def __init__(self, meter=None, prices: Prices | None = None):
        self.meter = meter if meter is not None else Meter()
        self.prices = prices or Prices()
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.requests = 0
        self._lock = threading.Lock()

    @property
    def budget_usd(self) -> float | None:
        return getattr(self.meter, "budget_usd", None)

    @property
    def cost_usd(self) -> float:
        return self.prices.cost(self.prompt_tokens, self.completion_tokens)

    def worst_case(self, prompt_bound: int, max_tokens: int) -> int:
        return self.prices.nano(prompt_bound, max_tokens)

    def reserve(self, nano: int) -> str:
        return self.meter.reserve(nano)

    def settle(self, reserved: int, prompt_tokens: int, completion_tokens: int, reported: bool = True) -> None:
        """An answer arrived: pay its reported cost, or the whole reservation when the server
        reported no usage."""
        with self._lock:
            self.requests += 1
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
        self.meter.settle(reserved, self.prices.nano(prompt_tokens, completion_tokens) if reported else reserved)

    def release(self, reserved: int) -> None:
        """The attempt failed before an answer: nothing was billed."""
        self.meter.settle(reserved, 0)

    def stop_reason(self) -> str:
        return self.meter.reason() or "LLM budget reached"

    def summary(self) -> dict:
        return {"requests": self.requests, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost_usd": round(self.cost_usd, 6)}

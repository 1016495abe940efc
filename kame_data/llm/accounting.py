"""Token and cost accounting, and the budget that stops a run cleanly."""

from __future__ import annotations

import threading
from dataclasses import dataclass


class BudgetExceeded(RuntimeError):
    """The run's LLM budget is spent; what was done so far is kept and published."""


@dataclass(frozen=True)
class Prices:
    """US dollars per million tokens."""

    prompt_per_million: float = 0.0
    completion_per_million: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.prompt_per_million + completion_tokens * self.completion_per_million) / 1e6


class Meter:
    """Counts what was actually paid for (cache hits are free) and enforces an optional budget."""

    def __init__(self, prices: Prices | None = None, budget_usd: float | None = None):
        self.prices = prices or Prices()
        self.budget_usd = budget_usd
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.requests = 0
        self._lock = threading.Lock()

    @property
    def cost_usd(self) -> float:
        return self.prices.cost(self.prompt_tokens, self.completion_tokens)

    def check(self) -> None:
        """Raise BudgetExceeded before spending more once the budget is reached."""
        if self.budget_usd is not None and self.cost_usd >= self.budget_usd:
            raise BudgetExceeded(f"LLM budget of ${self.budget_usd:.4f} reached (spent ${self.cost_usd:.4f} on "
                                 f"{self.requests} requests)")

    def add(self, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            self.requests += 1
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens

    def summary(self) -> dict:
        return {"requests": self.requests, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost_usd": round(self.cost_usd, 6)}

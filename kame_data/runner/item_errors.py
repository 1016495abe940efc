"""`max_item_errors`: when unexpected failures are one bad row and when they are the code.

An input a step raises on becomes an `internal_error` reject and the run goes on (executor.py).
A few such rejects in a paper-scale run are rows nobody foresaw; many are a bug or a broken
engine that every item meets, and going on would only burn hours producing rejects. Past the
limit the run stops with one line naming the first failure.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable

from kame_data.errors import INTERNAL_ERROR
from kame_data.records import Reject

DEFAULT_SHARE = 0.01
DEFAULT_FLOOR = 20


class TooManyItemErrors(RuntimeError):
    """More internal_error rejects than the recipe's `max_item_errors` allows."""


def item_error_limit(setting: float | None, items: int) -> int:
    """The allowed count: `setting` as a count, or below 1 a fraction of `items`; by default
    1% of the items or 20, whichever is larger."""
    if setting is None:
        return max(DEFAULT_FLOOR, math.ceil(DEFAULT_SHARE * items))
    if setting < 1:
        return math.floor(setting * items)
    return int(setting)


class ItemErrors:
    """Counts internal_error rejects per step as they arrive and stops the run past the limit."""

    def __init__(self, setting: float | None, items: int):
        self.limit = item_error_limit(setting, items)
        self.per_step: Counter[str] = Counter()
        self.first: Reject | None = None

    def add(self, rejects: Iterable[Reject]) -> None:
        for r in rejects:
            if r.reason != INTERNAL_ERROR:
                continue
            self.per_step[r.stage] += 1
            self.first = self.first or r
        total = sum(self.per_step.values())
        if total > self.limit:
            first = self.first
            raise TooManyItemErrors(
                f"{total} items failed with unexpected errors, more than max_item_errors ({self.limit}): "
                f"this looks systematic, not one bad row; first: step {first.stage}, item {first.id}: "
                f"{first.detail} (tracebacks in run.log; finished items are checkpointed, so after a fix "
                "the same command resumes)")

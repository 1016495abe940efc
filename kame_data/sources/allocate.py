"""A source's `dialogues` spread over the items that passed its filters, each rejected script
replaced by another variant of a passing item, and what still cannot be met said as a shortfall
with its reasons (docs/design.md, "Dialogue counts").

The allocation runs once, in the driver, before any batch: it asks the script step's own verdict
(`Verdict`: the Reject a variant would get, or None) for the variants it hands out, so the
script step refuses none of them later, and the count is known before any speech or LLM work is
paid for. Everything is ordered by a hash of (seed, source, item id): the same rows give the same
dialogues on any machine and with any number of workers.

Level by level (the first variant of every item, then the second, ...), in hash order, each item
gets its next accepted variant until the count is met: with no refusals this is the even spread
(every item `count // n`, the first `count % n` items in hash order one more); an item whose
variant is refused tries its next variant number, up to `max_variants` in all, and the count left
over goes to the next items.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Literal

from kame_data.records import Reject, SourceItem
from kame_data.sources.sampling import rank

log = logging.getLogger(__name__)

# The script step's refusal of a variant of an item (its Reject), or None when it would be scripted.
# Pure in (item, variant): the allocation may ask it in any order.
Verdict = Callable[[SourceItem, int], "Reject | None"]

Fill = Literal["count", "ratio"]
CAP = "max_variants"  # a shortfall's reason when every item has all the variants it may have


@dataclass
class Allocation:
    """What one source was asked for and what it will give (the manifest's `allocation`, the card's
    "Dialogues asked and made" table, `kame-data plan`'s kept column)."""

    source: str
    asked: int  # the recipe's `dialogues`
    target: int  # the count aimed at (asked, or scaled to the items found with fill: ratio)
    items: int  # items the dialogues were spread over (past the filters and the draw)
    dialogues: int = 0  # dialogues handed out; the script step scripts exactly these
    refused: Counter = field(default_factory=Counter)  # variants the script would refuse, by reason
    items_lost: int = 0  # items none of whose variants tried the script would take
    max_variants: int = 0
    rejects: list[Reject] = field(default_factory=list, repr=False)  # the refused variants, for rejects.jsonl
    read: int | None = None  # rows read from the source (set by the sources step)
    passed: int | None = None  # items past its filters (set by the sources step)
    filtered: Counter = field(default_factory=Counter)  # the filters' refusals, by reason (sources step)

    @property
    def shortfall(self) -> int:
        return max(0, self.asked - self.dialogues)

    def reasons(self) -> dict[str, int]:
        """Why the count is short, summing to the shortfall: `fewer_items` (fill: ratio scaled the
        count down), `max_variants` (every item at the cap, before any refusal), and the rest split
        over the script's refusal reasons in proportion to the variants each refused."""
        out: dict[str, int] = {}
        if self.target < self.asked:
            out["fewer_items"] = self.asked - self.target
        cap = max(0, self.target - self.items * self.max_variants)
        if cap:
            out[CAP] = cap
        rest = max(0, min(self.target, self.items * self.max_variants) - self.dialogues)
        total = sum(self.refused.values())
        if rest and total:
            exact = {r: rest * n / total for r, n in self.refused.items()}
            share = {r: int(x) for r, x in exact.items()}
            for r in sorted(exact, key=lambda r: (share[r] - exact[r], r))[: rest - sum(share.values())]:
                share[r] += 1
            out.update((r, n) for r, n in sorted(share.items(), key=lambda kv: -kv[1]) if n)
        return out

    def to_dict(self) -> dict:
        out = {"asked": self.asked, "target": self.target, "items": self.items, "dialogues": self.dialogues,
               "shortfall": self.shortfall, "items_lost": self.items_lost, "max_variants": self.max_variants,
               "refused": dict(self.refused.most_common()), "reasons": self.reasons()}
        if self.passed is not None:
            out.update(read=self.read, passed=self.passed, filtered=dict(self.filtered.most_common()))
        return out

    def describe(self) -> str:
        return describe(self.source, self.to_dict())


def describe(source: str, a: dict) -> str:
    """One line from an Allocation's dict (the manifest's): what was asked, what the script step
    gets, and why any shortfall."""
    line = f"{source}: {a['dialogues']:,} of {a['asked']:,} dialogues asked, from {a['items']:,} items"
    if not a["shortfall"]:
        return line
    why = ", ".join(f"{k} {v:,}" for k, v in a["reasons"].items())
    return f"{line}; {a['shortfall']:,} short ({why})"


def target_count(dialogues: int, items: int, planned_items: int | None, fill: Fill) -> int:
    """The count to aim at: the recipe's, or with fill: ratio and fewer items than the quota
    (`planned_items`), that many in proportion (the paper's dialogues per item kept)."""
    if fill == "ratio" and planned_items and items != planned_items:
        return round(dialogues * items / planned_items)
    return dialogues


def allocate(items: list[SourceItem], seed: int, salt: str, dialogues: int, max_variants: int,
             verdict: Verdict | None = None, planned_items: int | None = None,
             fill: Fill = "count") -> tuple[list[SourceItem], Allocation]:
    """The items that get dialogues (input order) with the variant numbers each scripts, and the
    source's Allocation. `verdict` None: every variant is accepted (the count is then met up to
    `max_variants` per item)."""
    target = target_count(dialogues, len(items), planned_items, fill)
    alloc = Allocation(salt, dialogues, target, len(items), max_variants=max_variants)
    if not items:
        return [], alloc
    order = sorted(items, key=lambda it: rank(seed, salt + ":variants", it.id))
    given: dict[str, list[int]] = {it.id: [] for it in items}
    tried = dict.fromkeys(given, 0)
    total = 0
    for level in range(1, max_variants + 1):
        if total >= target:
            break
        for it in order:
            if total >= target:
                break
            while len(given[it.id]) < level and tried[it.id] < max_variants:
                v = tried[it.id]
                tried[it.id] += 1
                refusal = verdict(it, v) if verdict is not None else None
                if refusal is None:
                    given[it.id].append(v)
                else:
                    alloc.refused[refusal.reason] += 1
                    alloc.rejects.append(refusal)
            if len(given[it.id]) >= level:
                total += 1
    alloc.dialogues = total
    alloc.items_lost = sum(1 for it in items if tried[it.id] and not given[it.id])
    if alloc.shortfall:
        log.warning("%s", alloc.describe())
    out = [replace(it, variants=len(given[it.id]), variant_numbers=given[it.id]) for it in items if given[it.id]]
    return out, alloc

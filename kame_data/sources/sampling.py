"""Deterministic stratified sampling and the dialogue mix.

Every choice is made by sorting on a hash of (seed, source, item id), never by a stateful RNG or
by Python's salted `hash`: the same seed and the same rows give the same selection on any machine,
and adding rows to a source leaves most earlier choices unchanged.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from dataclasses import replace
from typing import Mapping

from kame_data.records import SourceItem

log = logging.getLogger(__name__)


def rank(seed: int, salt: str, item_id: str) -> str:
    """A stable sort key."""
    return hashlib.sha256(f"{seed}:{salt}:{item_id}".encode("utf-8")).hexdigest()


def allocate(sizes: Mapping[str, int], total: int) -> dict[str, int]:
    """Split `total` over categories in proportion to their sizes (largest remainder, ties by
    name), never more than a category has."""
    available = sum(sizes.values())
    if total >= available:
        return dict(sizes)
    exact = {c: total * n / available for c, n in sizes.items()}
    out = {c: int(x) for c, x in exact.items()}
    left = total - sum(out.values())
    for c in sorted(sizes, key=lambda c: (-(exact[c] - out[c]), c))[:left]:
        out[c] += 1
    return out


def select(items: list[SourceItem], seed: int, salt: str, quota: int | None = None,
           per_category: int | Mapping[str, int] | None = None) -> list[SourceItem]:
    """A stratified sample of `items` (kept in their input order).

    `per_category` as a number caps every category; as a mapping it fixes each listed category's
    count (and leaves the others out). `quota` caps the total, spread over categories in
    proportion to their size."""
    if quota is None and per_category is None:
        return list(items)
    by_cat: dict[str, list[SourceItem]] = defaultdict(list)
    for it in items:
        by_cat[it.category].append(it)
    for group in by_cat.values():
        group.sort(key=lambda it: rank(seed, salt, it.id))
    if isinstance(per_category, Mapping):
        wanted = {c.casefold(): n for c, n in per_category.items()}
        sizes = {c: min(len(g), wanted[c.casefold()]) for c, g in by_cat.items() if c.casefold() in wanted}
        for c, n in per_category.items():
            have = sum(len(g) for k, g in by_cat.items() if k.casefold() == c.casefold())
            if have < n:
                log.warning("%s: category %r has %d items, fewer than the %d asked for", salt, c, have, n)
    elif isinstance(per_category, int):
        sizes = {c: min(len(g), per_category) for c, g in by_cat.items()}
    else:
        sizes = {c: len(g) for c, g in by_cat.items()}
    if quota is not None:
        if quota > sum(sizes.values()):
            log.warning("%s: quota %d but only %d items pass the filters", salt, quota, sum(sizes.values()))
        sizes = allocate(sizes, quota)
    chosen = {it.id for c, n in sizes.items() for it in by_cat[c][:n]}
    return [it for it in items if it.id in chosen]


def assign_variants(items: list[SourceItem], seed: int, salt: str, variants: int | None = None) -> list[SourceItem]:
    """Every item `variants` dialogues (None: the script config's count). A source's `dialogues`
    total is spread by sources/allocate.py instead."""
    if not items or variants is None:
        return items
    return [replace(it, variants=variants) for it in items]

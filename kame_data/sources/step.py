"""The sources step: every recipe source read, filtered, de-duplicated across sources and sampled."""

from __future__ import annotations

import logging
from dataclasses import asdict, replace
from itertools import zip_longest

from kame_data.errors import internal_error
from kame_data.recipe import Recipe, SourceSpec
from kame_data.records import Reject, SourceItem
from kame_data.sources.config import FilterConfig
from kame_data.sources.filters import dedup_key
from kame_data.sources.read import load_source
from kame_data.sources.allocate import Allocation, Verdict, allocate
from kame_data.sources.sampling import assign_variants, select
from kame_data.step import Resources, RunContext, Step


log = logging.getLogger(__name__)


class SourcesStep(Step[SourceSpec, SourceItem | Reject]):
    """Input: the recipe's source specs, as one batch (duplicates are found across sources, so the
    runner hands them all at once). Output per spec: its chosen items, then its rejects.
    `filters`: the recipe's `filters` section as the run config parsed it. `limit` (the CLI's
    --limit) caps how much an unsampled source reads. `verdict`: the script step's verdict on a
    variant of an item, which lets a source's `dialogues` be met (sources/allocate.py; None, or a
    --limit run, which scripts a few items and would pay more for judging the whole source: spread
    without it, the script step refusing what it refuses). `rewrite_length`: an LLM rewrite will
    condense what the template cannot fit, so `too_long` is the script's to decide (filters.check).
    After `run`, `allocations` holds each source's Allocation (a source asking `dialogues`)."""

    name = "sources"

    def __init__(self, recipe: Recipe, filters: FilterConfig, limit: int | None = None,
                 verdict: Verdict | None = None, rewrite_length: bool = False):
        self.recipe = recipe
        self.limit = limit
        self.filters = filters
        self.verdict = verdict if limit is None else None
        self.rewrite_length = rewrite_length
        self.allocations: dict[str, Allocation] = {}
        super().__init__({"sources": [asdict(s) for s in recipe.sources], "filters": asdict(self.filters),
                          "limit": limit, "rewrite_length": rewrite_length}, RunContext(seed=recipe.seed))

    @property
    def resources(self) -> Resources:
        return Resources(checkpoint=False)  # reading is cheap and the files may change

    def run(self, batch: list[SourceSpec]) -> list[list[SourceItem | Reject]]:
        groups: list[list[SourceItem | Reject]] = []
        seen_ids: set[str] = set()
        seen_text: dict[str, str] = {}
        for spec in batch:
            if self.limit is not None and spec.quota is None and spec.per_category is None:
                spec = replace(spec, limit=min(self.limit, spec.limit or self.limit))  # read no more than needed
            kept, rejects = self.read(spec, seen_ids, seen_text)
            salt = spec.name or spec.kind
            chosen = select(kept, self.seed, salt, spec.quota, spec.per_category)
            if len(chosen) < len(kept):
                log.info("%s: sampled %d of %d items", salt, len(chosen), len(kept))
            if spec.dialogues is not None:
                chosen, alloc = allocate(chosen, self.seed, salt, spec.dialogues, spec.max_variants, self.verdict,
                                         spec.quota, spec.fill)
                alloc.passed, alloc.read = len(kept), len(kept) + len(rejects)
                alloc.filtered.update(r.reason for r in rejects)
                self.allocations[salt] = alloc
                rejects += alloc.rejects
            else:
                chosen = assign_variants(chosen, self.seed, salt, spec.variants)
            groups.append(chosen + rejects)
        return groups

    def read(self, spec: SourceSpec, seen_ids: set[str] | None = None,
             seen_text: dict[str, str] | None = None) -> tuple[list[SourceItem], list[Reject]]:
        """One source's items past the filters and de-duplication (against the items of the sources
        read before it, in `seen_ids` and `seen_text`, which it extends), and its rejects."""
        seen_ids = set() if seen_ids is None else seen_ids
        seen_text = {} if seen_text is None else seen_text
        kept: list[SourceItem] = []
        rejects: list[Reject] = []
        for result in load_source(spec, self.recipe, self.filters, self.rewrite_length):
            if isinstance(result, Reject):
                rejects.append(result)
                continue
            try:
                key = dedup_key(result)
            except Exception as e:  # a normaliser bug on one item: that item's reject
                rejects.append(internal_error(self.name, result.id, e, log))
                continue
            if result.id in seen_ids:
                rejects.append(Reject("sources", result.id, "duplicate_id", "an earlier item has the same id"))
            elif key in seen_text and "duplicate" not in self.filters.skip:
                rejects.append(Reject("sources", result.id, "duplicate", f"same text as {seen_text[key]}"))
            else:
                seen_ids.add(result.id)
                seen_text.setdefault(key, result.id)
                kept.append(result)
        return kept, rejects

    def interleave(self, groups: list[list[SourceItem | Reject]]) -> list[SourceItem]:
        """Items of every source taken in turn (so a small --limit still covers each source
        style), at most `limit` in all."""
        per_source = [[r for r in g if isinstance(r, SourceItem)] for g in groups]
        items = [it for group in zip_longest(*per_source) for it in group if it is not None]
        return items[: self.limit] if self.limit is not None else items

    def items(self) -> tuple[list[SourceItem], list[Reject]]:
        """(items, rejects) of the whole recipe."""
        groups = self.run(list(self.recipe.sources))
        items = self.interleave(groups)
        rejects = [r for g in groups for r in g if isinstance(r, Reject)]
        log.info("loaded %d items (%d rejected) from %d sources", len(items), len(rejects), len(groups))
        return items, rejects

"""Source adapters: benchmark rows (hub or local files) -> SourceItem records or Rejects."""

from __future__ import annotations

import logging
from itertools import zip_longest
from typing import Callable, Iterable

from kame_data.records import Reject, SourceItem
from kame_data.recipe import Recipe, SourceSpec
from kame_data.sources import gsm8k, hssbench, mmlu_pro
from kame_data.sources.rows import read_rows

log = logging.getLogger(__name__)

RowParser = Callable[[dict, int], "SourceItem | Reject"]

ADAPTERS: dict[str, RowParser] = {
    "mmlu_pro": mmlu_pro.parse_row,
    "gsm8k": gsm8k.parse_row,
    "hssbench": hssbench.parse_row,
}

DEFAULT_LICENSES = {"mmlu_pro": "mit", "gsm8k": "mit", "hssbench": "unknown"}


def load_source(spec: SourceSpec, recipe: Recipe | None = None) -> Iterable[SourceItem | Reject]:
    """Items of one source, in file order, stopping after `spec.limit` accepted items."""
    parse = ADAPTERS[spec.kind]
    path = recipe.resolve(spec.path) if (recipe is not None and spec.path) else spec.path
    accepted = 0
    for index, row in enumerate(read_rows(path=path, hub=spec.hub, config=spec.config, split=spec.split)):
        result = parse(row, index)
        if isinstance(result, SourceItem) and spec.license:
            result = SourceItem(**{**result.to_dict(), "license": spec.license})
        yield result
        if isinstance(result, SourceItem):
            accepted += 1
            if spec.limit is not None and accepted >= spec.limit:
                return


def load_items(recipe: Recipe, limit: int | None = None) -> tuple[list[SourceItem], list[Reject]]:
    """All items of a recipe, interleaved across sources (so a small `limit` still covers each
    source style), at most `limit` in all."""
    per_source: list[list[SourceItem]] = []
    rejects: list[Reject] = []
    seen: set[str] = set()
    for spec in recipe.sources:
        if limit is not None:
            spec = SourceSpec(**{**spec.__dict__, "limit": min(limit, spec.limit or limit)})
        kept: list[SourceItem] = []
        for result in load_source(spec, recipe):
            if isinstance(result, Reject):
                rejects.append(result)
            elif result.id in seen:
                rejects.append(Reject("sources", result.id, "duplicate_id", "an earlier item has the same id"))
            else:
                seen.add(result.id)
                kept.append(result)
        per_source.append(kept)
    items = [it for group in zip_longest(*per_source) for it in group if it is not None]
    if limit is not None:
        items = items[:limit]
    log.info("loaded %d items (%d rejected) from %d sources", len(items), len(rejects), len(recipe.sources))
    return items, rejects

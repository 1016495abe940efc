"""Source adapters: benchmark rows (hub or local files) -> SourceItem records or Rejects.

`load_items` is the sources stage: parse every row, refuse what cannot be spoken (filters, each
with a reason code), drop duplicates across sources, then take the recipe's stratified sample and
set how many dialogues each item yields.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import replace
from itertools import zip_longest
from typing import Callable, Iterable

from kame_data.recipe import Recipe, RecipeError, SourceSpec, build_config
from kame_data.records import Reject, SourceItem
from kame_data.sources import gsm8k, hssbench, jsonl, mmlu_pro, mt_bench
from kame_data.sources.filters import FilterConfig, check, dedup_key
from kame_data.sources.rows import read_rows
from kame_data.sources.sampling import assign_variants, select

log = logging.getLogger(__name__)

RowParser = Callable[[dict, int], "SourceItem | Reject"]

ADAPTERS: dict[str, RowParser] = {
    "mmlu_pro": mmlu_pro.parse_row,
    "gsm8k": gsm8k.parse_row,
    "hssbench": hssbench.parse_row,
    "mt_bench": mt_bench.parse_row,
}

DEFAULT_LICENSES = {"mmlu_pro": "mit", "gsm8k": "mit", "hssbench": "unknown", "mt_bench": "apache-2.0",
                    "jsonl": "unknown"}


def parser_for(spec: SourceSpec) -> RowParser:
    if spec.kind == "jsonl":
        if not spec.fields or "question" not in spec.fields or "answer" not in spec.fields:
            raise RecipeError("a `kind: jsonl` source needs `fields` naming at least `question` and `answer`")
        return functools.partial(jsonl.parse_row, fields=dict(spec.fields), source=spec.name or "jsonl")
    try:
        return ADAPTERS[spec.kind]
    except KeyError:
        raise RecipeError(f"unknown source kind {spec.kind!r} (available: {', '.join(sorted(ADAPTERS))}, jsonl)")


def filter_config(recipe: Recipe | None) -> FilterConfig:
    return build_config(FilterConfig, (recipe.raw.get("filters") if recipe is not None else None) or {})


def load_source(spec: SourceSpec, recipe: Recipe | None = None,
                filters: FilterConfig | None = None) -> Iterable[SourceItem | Reject]:
    """Items of one source in file order, each checked by the filters (a Reject with the reason
    when refused); rows outside `spec.categories` are skipped; stops after `spec.limit` accepted."""
    parse = parser_for(spec)
    filters = filters if filters is not None else filter_config(recipe)
    path = recipe.resolve(spec.path) if (recipe is not None and spec.path) else spec.path
    wanted = {c.casefold() for c in spec.categories} if spec.categories else None
    accepted = 0
    for index, row in enumerate(read_rows(path=path, hub=spec.hub, config=spec.config, split=spec.split)):
        result = parse(row, index)
        if isinstance(result, SourceItem):
            if wanted is not None and result.category.casefold() not in wanted:
                continue
            if spec.license:
                result = replace(result, license=spec.license)
            flag = check(result, filters)
            if flag is not None:
                result = Reject("sources", result.id, flag.reason, flag.detail)
        yield result
        if isinstance(result, SourceItem):
            accepted += 1
            if spec.limit is not None and accepted >= spec.limit:
                return


def load_items(recipe: Recipe, limit: int | None = None) -> tuple[list[SourceItem], list[Reject]]:
    """All items of a recipe, interleaved across sources (so a small `limit` still covers each
    source style), at most `limit` in all."""
    filters = filter_config(recipe)
    per_source: list[list[SourceItem]] = []
    rejects: list[Reject] = []
    seen_ids: set[str] = set()
    seen_text: dict[str, str] = {}
    for spec in recipe.sources:
        if limit is not None and spec.quota is None and spec.per_category is None:
            spec = replace(spec, limit=min(limit, spec.limit or limit))  # no sampling: read no more than needed
        kept: list[SourceItem] = []
        for result in load_source(spec, recipe, filters):
            if isinstance(result, Reject):
                rejects.append(result)
                continue
            key = dedup_key(result)
            if result.id in seen_ids:
                rejects.append(Reject("sources", result.id, "duplicate_id", "an earlier item has the same id"))
            elif key in seen_text and "duplicate" not in filters.skip:
                rejects.append(Reject("sources", result.id, "duplicate", f"same text as {seen_text[key]}"))
            else:
                seen_ids.add(result.id)
                seen_text.setdefault(key, result.id)
                kept.append(result)
        salt = spec.name or spec.kind
        chosen = select(kept, recipe.seed, salt, spec.quota, spec.per_category)
        if len(chosen) < len(kept):
            log.info("%s: sampled %d of %d items", salt, len(chosen), len(kept))
        chosen = assign_variants(chosen, recipe.seed, salt, spec.variants, spec.dialogues, spec.quota)
        per_source.append(chosen)
    items = [it for group in zip_longest(*per_source) for it in group if it is not None]
    if limit is not None:
        items = items[:limit]
    log.info("loaded %d items (%d rejected) from %d sources", len(items), len(rejects), len(recipe.sources))
    return items, rejects

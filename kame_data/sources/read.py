"""Reading one source: its kind's row parser, then every row checked against the kind's schema,
parsed and filtered, as SourceItem records or Rejects in file order (the sources step reads every
source of a recipe through `load_source`)."""

from __future__ import annotations

import functools
import logging
from dataclasses import replace
from typing import Callable, Iterable

from kame_data.errors import internal_error
from kame_data.recipe import Recipe, RecipeError, SourceSpec
from kame_data.records import Reject, SourceItem
from kame_data.sources import gsm8k, hssbench, jsonl, mmlu_pro, mt_bench
from kame_data.sources.config import FilterConfig
from kame_data.sources.filters import check
from kame_data.sources.row_schemas import RowSchema
from kame_data.sources.rows import BadRow, SourceError, numbered_rows, where

log = logging.getLogger(__name__)

RowParser = Callable[[dict, int], "SourceItem | Reject"]

ADAPTERS: dict[str, RowParser] = {
    "mmlu_pro": mmlu_pro.parse_row,
    "gsm8k": gsm8k.parse_row,
    "hssbench": hssbench.parse_row,
    "mt_bench": mt_bench.parse_row,
}

# Every `kind` a recipe's source may name: a benchmark's adapter, or jsonl with a field mapping.
KINDS = (*ADAPTERS, "jsonl")

DEFAULT_LICENSES = {"mmlu_pro": "mit", "gsm8k": "mit", "hssbench": "unknown", "mt_bench": "apache-2.0",
                    "jsonl": "unknown"}


def parser_for(spec: SourceSpec) -> RowParser:
    if spec.kind == "jsonl":
        if not spec.fields or "question" not in spec.fields or "answer" not in spec.fields:
            raise RecipeError("a `kind: jsonl` source needs `fields` naming at least `question` and `answer`")
        return functools.partial(jsonl.parse_row, fields=dict(spec.fields), source=spec.source)
    try:
        return ADAPTERS[spec.kind]
    except KeyError:
        raise RecipeError(f"unknown source kind {spec.kind!r} (available: {', '.join(sorted(ADAPTERS))}, jsonl)")


def load_source(spec: SourceSpec, recipe: Recipe | None = None, filters: FilterConfig | None = None,
                rewrite_length: bool = False) -> Iterable[SourceItem | Reject]:
    """Items of one source in file order, each checked by the filters (a Reject with the reason
    when refused; None: the default filters); rows outside `spec.categories` are skipped; stops
    after `spec.limit` accepted. `recipe`: the folder relative paths start from.
    `rewrite_length`: leave `too_long` to the LLM rewrite (filters.check)."""
    parse = parser_for(spec)
    shape = RowSchema(spec.kind, dict(spec.fields or {}))
    filters = filters if filters is not None else FilterConfig()
    path = recipe.resolve(spec.path) if (recipe is not None and spec.path) else spec.path
    file = str(path) if path is not None else str(spec.hub)
    wanted = {c.casefold() for c in spec.categories} if spec.categories else None
    accepted = 0
    bad = BadRows(spec, path)
    lines = 0
    for index, (line, row) in enumerate(numbered_rows(path=path, hub=spec.hub, config=spec.config, split=spec.split)):
        lines = index + 1
        if isinstance(row, BadRow):  # counts in `index`: mending a line does not renumber the rows after it
            bad.add(row, lines)
            yield Reject("sources", row.where, row.reason, f"{row.file}:{row.line}: {row.detail}")
            continue
        item_id = where(file, line)
        try:
            problem = shape.problem(row)
            if problem is not None:
                yield Reject("sources", item_id, "invalid_row", f"{file}:{line}: {problem}")
                continue
            result = parse(row, index)
            if isinstance(result, SourceItem):
                item_id = result.id
                if wanted is not None and result.category.casefold() not in wanted:
                    continue
                if spec.license:
                    result = replace(result, license=spec.license)
                flag = check(result, filters, rewrite_length)
                if flag is not None:
                    result = Reject("sources", result.id, flag.reason, flag.detail)
        except Exception as e:  # a bug of ours on one row: that row's reject, never the run's end
            yield internal_error("sources", item_id, e, log)
            continue
        yield result
        if isinstance(result, SourceItem):
            accepted += 1
            if spec.limit is not None and accepted >= spec.limit:
                return  # a fraction is of the whole file: a partial read is not judged by it
    bad.finish(lines)


class BadRows:
    """A source's malformed lines against its `max_bad_rows`: a count is checked as lines are
    read, a fraction (below 1) once the whole file is read; beyond either the run stops with one
    line naming the first bad line."""

    def __init__(self, spec: SourceSpec, path):
        self.limit = spec.max_bad_rows
        if self.limit is None or self.limit < 0:
            raise RecipeError(f"source {spec.name or spec.kind}: max_bad_rows must be a count or a fraction >= 0")
        self.fraction = isinstance(self.limit, float) and self.limit < 1
        self.label = f"{spec.name or spec.kind} ({path or spec.hub})"
        self.count = 0
        self.first: BadRow | None = None

    def add(self, row: BadRow, lines: int) -> None:
        self.count += 1
        self.first = self.first or row
        if not self.fraction and self.count > self.limit:
            self._stop(lines)

    def finish(self, lines: int) -> None:
        if self.fraction and self.count > self.limit * lines:
            self._stop(lines)

    def _stop(self, lines: int) -> None:
        first = self.first
        allowed = f"{self.limit * 100:g}% of the lines" if self.fraction else f"{int(self.limit)}"
        raise SourceError(f"source {self.label}: {self.count} malformed of {lines} lines read, more than "
                          f"max_bad_rows ({allowed}); first: {first.file}:{first.line}: {first.detail} "
                          f"[{first.reason}]")

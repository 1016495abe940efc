"""Source adapters: benchmark rows (hub or local files) -> SourceItem records or Rejects.

`load_items` is the sources stage: check every row against its kind's schema (row_schemas.py),
parse it, refuse what cannot be spoken (filters, each with a reason code), drop duplicates across
sources, then take the recipe's stratified sample and set how many dialogues each item yields.
One row that makes our code fail is a transient `internal_error` reject (the traceback goes to
run.log) and reading goes on: a fixed version retries it.
"""

from __future__ import annotations

from kame_data.recipe import Recipe
from kame_data.records import Reject, SourceItem
from kame_data.sources.config import FilterConfig
from kame_data.sources.read import ADAPTERS, DEFAULT_LICENSES, KINDS, BadRows, load_source, parser_for

__all__ = ["ADAPTERS", "DEFAULT_LICENSES", "KINDS", "BadRows", "load_items", "load_source", "parser_for"]


def load_items(recipe: Recipe, filters: FilterConfig,
               limit: int | None = None) -> tuple[list[SourceItem], list[Reject]]:
    """All items of a recipe's sources through `filters` (the run config's), interleaved across
    sources (so a small `limit` still covers each source style), at most `limit` in all; and
    every reject."""
    from kame_data.sources.step import SourcesStep

    return SourcesStep(recipe, filters, limit).items()

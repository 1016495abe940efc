"""The sources step's filter config (the recipe's `filters:` section)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from kame_data.config_schema import Schema

# The reason code of each filter (sources/filters.py), which `skip` names to turn it off.
Reason = Literal["malformed_answer", "not_english", "table", "needs_image", "needs_context", "code", "heavy_latex",
                 "heavy_math", "too_long", "duplicate"]
Positive = Annotated[float, Schema(exclusiveMinimum=0)]
AtLeastZero = Annotated[int, Schema(minimum=0)]


@dataclass(frozen=True)
class FilterConfig:
    """Speech-suitability filters (kame_data/sources/filters.py); each refused item is a reject with the filter's reason code."""

    skip: Annotated[tuple[Reason, ...], Schema(uniqueItems=True)] = ()  # reason codes whose filter is turned off
    max_seconds: Positive = 45.0  # the shortest user turn the script could say (see too_long), at `words_per_second`
    # Options counted in that turn: the answer and the shortest others (the script reads fewer options
    # when a turn runs long, never fewer than the answer and one other).
    options_read: AtLeastZero = 2
    words_per_second: Positive = 2.6  # speaking rate the turn length is estimated at
    max_latex_commands: AtLeastZero = 8  # more LaTeX commands than this in an item is too much to read aloud
    max_math_symbols: AtLeastZero = 8  # logic / set symbols (∨ ⊃ ∀ { } < >) in the question and options
    max_foreign_letters: AtLeastZero = 0  # letters outside the Latin and Greek scripts (Han, Cyrillic, ...)
    min_foreign_words: Annotated[int, Schema(minimum=1)] = 3  # function words of another language that mark Latin-script text as foreign

"""The sources step's filter config (the recipe's `filters:` section)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FilterConfig:
    """The recipe's `filters:` section."""

    skip: tuple[str, ...] = ()  # reason codes whose filter is turned off
    max_seconds: float = 45.0  # the shortest user turn the script could say (see too_long), at `words_per_second`
    options_read: int = 2  # options counted in that turn: the answer and the shortest others (the script
    # reads fewer options when a turn runs long, never fewer than the answer and one other)
    words_per_second: float = 2.6
    max_latex_commands: int = 8  # more LaTeX commands than this in an item is too much to read aloud
    max_math_symbols: int = 8  # logic / set symbols (∨ ⊃ ∀ { } < >) in the question and options
    max_foreign_letters: int = 0  # letters outside the Latin and Greek scripts (Han, Cyrillic, ...)
    min_foreign_words: int = 3  # function words of another language that mark Latin-script text as foreign

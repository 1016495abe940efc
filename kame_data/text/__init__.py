"""Spoken-text vocabulary shared by every stage: display text to what a voice says, and its words.

`to_spoken` (spoken.py) runs the normaliser's passes in order; each module holds one kind of
notation: prepare (characters, signs, abbreviations), numbers, dates, units (measures and money),
latex (formulas), symbols, compounds (words run together upstream), tokens (the final tidy,
speakability and word splitting).
"""

from kame_data.text.numbers import (
    cardinal,
    say_fraction,
    say_number,
    say_ordinal,
    say_year,
)
from kame_data.text.spoken import to_spoken
from kame_data.text.tokens import (
    SPOKEN_PUNCTUATION,
    UNSPEAKABLE,
    is_speakable,
    spoken_seconds,
    spoken_tokens,
    spoken_words,
    unspoken,
)

__all__ = [
    "SPOKEN_PUNCTUATION",
    "UNSPEAKABLE",
    "cardinal",
    "is_speakable",
    "say_fraction",
    "say_number",
    "say_ordinal",
    "say_year",
    "spoken_seconds",
    "spoken_tokens",
    "spoken_words",
    "to_spoken",
    "unspoken",
]

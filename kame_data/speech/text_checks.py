"""What the speak step refuses before any engine sees a turn: text no voice can say."""

from __future__ import annotations

import unicodedata

from kame_data.text import spoken_tokens
from kame_data.text.tokens import CHARS_PER_SECOND, WORDS_PER_SECOND

MAX_WORD_CHARS = 60  # longer "words" are noise (hashes, base64, runs of letters), not speech
_WHITESPACE_CONTROLS = {"\n", "\r", "\t"}


def unspeakable(spoken: str, max_seconds: float) -> tuple[str, str] | None:
    """(reason, detail) when a turn's text cannot be spoken, before any engine sees it."""
    bad = sorted({f"U+{ord(c):04X}" for c in spoken
                  if unicodedata.category(c)[0] == "C" and c not in _WHITESPACE_CONTROLS})
    if bad:
        return "control_characters", f"control or unassigned characters {', '.join(bad[:5])}"
    tokens = spoken_tokens(spoken)
    if not tokens:
        return "empty_text", "no words to speak"
    seconds = max(len(tokens) / WORDS_PER_SECOND, len(spoken) / CHARS_PER_SECOND)
    if seconds > max_seconds:
        return "too_long", f"about {seconds:.0f} s > {max_seconds:.0f} s"
    longest = max((w for w, _ in tokens), key=len)
    if len(longest) > MAX_WORD_CHARS:
        return "unspeakable_word", f"a {len(longest)}-character word ({longest[:20]}…)"
    return None

"""What is left after every pass, and how the result is checked and split into words.

`tidy` drops whatever symbol survived and normalises spacing and punctuation; `unspoken` says
what keeps a text from being spoken text (what `to_spoken` returns), `is_speakable` whether it
can go to a voice; `spoken_tokens` and `spoken_words` are the
words as transcripts list them (shared by the voices, Whisper checks and the script stage).
"""

from __future__ import annotations

import re

UNSPEAKABLE = re.compile(r"[0-9$\\]|<<|####")
# What spoken text is made of (to_spoken's output, what a voice is given): letters of any script,
# single spaces between words, the pauses , . ; : ? ! and an apostrophe inside a word ("it's").
# No digit (numbers are words), no symbol (read as words or dropped), no other mark or space.
SPOKEN_PUNCTUATION = ",.;:?!'"


def tidy(text: str) -> str:
    text = re.sub(r"(?<=[A-Za-z])-(?=[A-Za-z])", " ", text)  # twenty-four -> twenty four (one word per TTS word)
    text = re.sub(r"\(\s*\)|（\s*）|_{2,}", " ", text)  # fill-in blanks
    text = re.sub(r"[^\w\s,.;:?!'\"-]", " ", text)  # whatever is left is not speakable
    text = text.replace("_", " ").replace('"', " ")
    text = re.sub(r"(?<!\w)'|'(?!\w)", " ", text)
    text = re.sub(r"(?<![A-Za-z])-+|-+(?![A-Za-z])", " ", text)
    text = re.sub(r"\s+([,.;:?!])", r"\1", text)
    text = re.sub(r"([,.;:?!])(?=[A-Za-z])", r"\1 ", text)
    text = re.sub(r"([,;:])(?:\s*[,;:])+", r"\1", text)
    text = re.sub(r"\.(?:\s*\.){2,}", "...", text)  # an ellipsis stays a pause
    text = re.sub(r"(?<!\.)\.\s*\.(?!\.)", ".", text)
    text = re.sub(r"([,;:])\s*([.?!])", r"\2", text)
    # A sentence's end then a comma, where a line break or a dash followed it ("his ancestors.\n—Alfred
    # Crosby"): the end stays. Not after an initial ("Samuel S., age 43") or an ellipsis.
    text = re.sub(r"([?!]|(?<=[A-Za-z]{2})\.)(?:\s*[,;:])+", r"\1", text)
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r"^[,.;:]\s*", "", text)


def unspoken(spoken: str) -> str:
    """What keeps text from being spoken text (see SPOKEN_PUNCTUATION): '' when it is, else the
    characters a voice cannot say, or the spacing or apostrophe out of place."""
    stray = "".join(dict.fromkeys(ch for ch in spoken if not (ch.isalpha() or ch == " " or ch in SPOKEN_PUNCTUATION)))
    if stray:
        return f"characters {stray[:20]!r}"
    if spoken != spoken.strip() or "  " in spoken:
        return "spacing"
    if re.search(r"(?<![^\W\d_])'|'(?![^\W\d_])", spoken):
        return "an apostrophe outside a word"
    return ""


def is_speakable(spoken: str) -> bool:
    """True when spoken text has words and nothing a voice cannot read."""
    return bool(spoken_words(spoken)) and not unspoken(spoken)  # unspoken() covers UNSPEAKABLE


_WORD_EDGE = re.compile(r"^[^\w']+|[^\w']+$")


WORDS_PER_SECOND = 2.6  # a conservative speaking rate: turn lengths are bounded before any voice runs
CHARS_PER_SECOND = 14.0  # the same for text with few, long words


def spoken_seconds(spoken: str, words_per_second: float = WORDS_PER_SECOND) -> float:
    """About how long spoken text takes to say (the larger of the word and character estimates)."""
    return max(len(spoken_words(spoken)) / words_per_second,
               len(spoken) / CHARS_PER_SECOND * WORDS_PER_SECOND / words_per_second)


def spoken_tokens(spoken: str) -> list[tuple[str, int]]:
    """(word, character offset) for each word of spoken text; outer punctuation removed."""
    out = []
    for m in re.finditer(r"\S+", spoken):
        w = _WORD_EDGE.sub("", m.group(0)).strip("'")
        if w:
            out.append((w, m.start()))
    return out


def spoken_words(spoken: str) -> list[str]:
    """The words of spoken text as transcripts list them."""
    return [w for w, _ in spoken_tokens(spoken)]

"""Words run together in the source ('totransport', 'salvagevalue', 'BennetBros.') said as two words.

Some benchmark rows lost a space upstream (MMLU-Pro business questions carry 'wouldthey' and
'straight-linemethod'). A voice reads such a token as one strange word, so the turn sounds wrong and
its WER counts a substitution and an insertion against any voice. This pass splits a token in two
when it is not an English word and both halves are common words, choosing the split whose halves
are most frequent (Zipf's law, as word segmenters do); failing that, in three around a rare word with a
common word glued to each side ('ofacetonitrilewith', `split_around`).

The word frequencies are wordninja's list (the 126k most frequent words of English Wikipedia, by
rank); a token in that list, or one of its inflections ('transports', 'salvaged'), is a word and is
never split, so rare real words ('donuts', 'erectus', 'anorectic') stay whole. Halves must rank
within `COMMON` (the 40,000 most frequent words), which keeps 'as ingle' out; a half of one or two letters must be a
function word ('a', 'to', 'in'), which keeps 'va lorem' and 'di hybrid' out.
Capitalised tokens split only at an inner capital ('BennetBros' -> 'Bennet Bros', never 'Ben net'), and a
function word glued to one comes off ('ofAtebrin' -> 'of Atebrin').
"""

from __future__ import annotations

import gzip
import importlib.util
import math
import re
from functools import lru_cache
from pathlib import Path

COMMON = 40_000  # a half must be among the most frequent words: "salvage" (32,903rd) is, "ingle" (64,476th) not
GLUED_SHORTEST = 4  # 'itis', 'thetop': a function word glued to a common word is split from this length
MIN_LENGTH = 7  # shorter tokens are almost always real words or names the list lacks
# Inflections and derivations of a listed word are words too ('transports', 'salvaged', 'microvilli' no).
_SUFFIXES = ("s", "es", "ed", "d", "ing", "ly", "er", "ers", "est", "ness", "ment", "ments", "ity", "able",
             "al", "ally", "ation", "ations", "ism", "ist", "ists", "ize", "ized", "izes", "izing", "ic", "ics",
             "less", "ful", "ship", "hood", "wise", "like", "ward", "wards", "ish", "ous", "ive", "ee", "ees",
             "ion", "ions")
_PREFIXES = ("un", "re", "pre", "non", "anti", "over", "under", "hyper", "micro", "macro", "poly", "auto",
             "multi", "inter", "super", "semi", "sub", "co", "de", "dis", "mis", "bio", "counter", "out",
             # SI prefixes: the units pass says 'kilovolts', 'millimoles', which are words, not 'kilo volts'
             "kilo", "milli", "mega", "giga", "tera", "nano", "pico", "femto", "centi", "deci", "hecto",
             # and the prefixes of science words ('inactivated', 'transconductance', 'immunotherapy')
             "in", "im", "en", "trans", "immuno", "electro", "thermo", "photo", "hydro", "neuro", "cardio")
# 'in-', 'im-', 'en-' make words of derived stems ('inactivated', 'insoluble'), not of nouns glued to 'in' ('incrustacea').
_NEGATING = frozenset({"in", "im", "en"})
_DERIVED = re.compile(r"(?:ed|able|ible|ive|ity|ate|ates|ated|ent|ant|al|ic|ous|ion|ions|ly|ness)$")
# Two-letter halves only from words that are never the end of a longer one ('va lorem', 'di hybrid').
_SHORT = frozenset("a i to of in on at by an as is it be or if so no up we he my me us do am".split())
SHORT_COMMON = 2_000  # a three-letter half must be this common: 'the', 'six', 'law'; not 'der', 'ee'
# Not inside a LaTeX command, an identifier or a call ('\\rightarrow', 'os.listdir(', 'f.endswith(').
_LOWER = re.compile(r"(?<![A-Za-z'\\._\d])[a-z]{%d,}(?![A-Za-z_\d(])" % MIN_LENGTH)
_CAMEL = re.compile(r"(?<![A-Za-z])([A-Z][a-z]{2,})([A-Z][a-z]{2,})(?![A-Za-z])")
# A function word glued to a capitalised word or symbol ('ofAtebrin', 'forAtebrin', 'theK').
_GLUED_CAPITAL = re.compile(r"(?<![A-Za-z'\\._\d])(of|for|the|and|with|from|that|than|into)(?=[A-Z])")


@lru_cache(maxsize=1)
def ranks() -> dict[str, int]:
    """word -> frequency rank (0 is 'the'), from the wordninja package's data file (read, not imported:
    the module builds its own model at import)."""
    spec = importlib.util.find_spec("wordninja")
    if spec is None or spec.origin is None:
        raise ImportError("kame-data's text normaliser needs the wordninja package (pip install wordninja)")
    path = Path(spec.origin).parent / "wordninja" / "wordninja_words.txt.gz"
    words = gzip.decompress(path.read_bytes()).decode("utf-8").split()
    return {w: i for i, w in reversed(list(enumerate(words)))}


def is_word(token: str) -> bool:
    """A listed word, or a listed word with a common prefix or suffix ('reheated', 'salvages')."""
    r = ranks()
    if token in r:
        return True
    for suffix in _SUFFIXES:
        stem = token[: -len(suffix)]
        if token.endswith(suffix) and len(stem) >= 3:
            if stem in r or stem + "e" in r or (stem[-1] == "i" and stem[:-1] + "y" in r) \
                    or (len(stem) > 3 and stem[-1] == stem[-2] and stem[:-1] in r):
                return True
    return any(token.startswith(p) and len(token) - len(p) >= 4 and is_word(token[len(p):])
               and (p not in _NEGATING or _DERIVED.search(token)) for p in _PREFIXES)


def split_token(token: str) -> tuple[str, str] | None:
    """The two common words a lowercase token is made of, or None when it is a word or no split is
    plausible. Among splits into two common words, the one with the lowest Zipf cost wins."""
    if is_word(token):
        return None
    r = ranks()
    best, best_cost = None, math.inf
    for i in range(1, len(token)):
        a, b = token[:i], token[i:]
        ra, rb = r.get(a, COMMON), r.get(b, COMMON)
        if len(b) == 1 or not (_common(a, ra) and _common(b, rb)):  # 'a' ends no run ('rheumatic a')
            continue
        cost = math.log(ra + 2) + math.log(rb + 2)
        if cost < best_cost:
            best, best_cost = (a, b), cost
    return best


GLUED_MIN = 10  # a run around a rare word is long: 'ofacetonitrilewith', 'termtransgressivesegregation'


def split_around(token: str) -> tuple[str, str, str] | None:
    """A rare word with a common word glued to each side ('of' + 'acetonitrile' + 'with', 'an' +
    'antimalarial' + 'drug'), for a lowercase token that is no word and has no two-word split.
    Both sides, because one side alone is how science words are built: 'mono valent', 'thermo
    chemical', 'inner vated' and 'hypochondrias is' are what a one-sided split made of the fixtures'
    words. The middle must be a word (`is_word`) of six letters or more; the sides common (`_common`)."""
    if len(token) < GLUED_MIN or is_word(token):
        return None
    r = ranks()
    best, best_cost = None, math.inf
    for i in range(1, len(token) - 6):
        a = token[:i]
        if not _common(a, r.get(a, COMMON)):
            continue
        for j in range(i + 6, len(token) - 1):
            m, b = token[i:j], token[j:]
            if not _common(b, r.get(b, COMMON)) or not is_word(m):
                continue
            cost = sum(math.log(r.get(x, COMMON * 3) + 2) for x in (a, m, b))
            if cost < best_cost:
                best, best_cost = (a, m, b), cost
    return best


def _common(half: str, rank: int) -> bool:
    if len(half) <= 2:
        return half in _SHORT
    return rank < (SHORT_COMMON if len(half) == 3 else COMMON)


# A word broken at a line's end and its hyphen kept ('refrac-tion', 'tem- perature', 'negli-gible').
_BROKEN = re.compile(r"(?<![\w-])([A-Za-z]{2,})-\s?([a-z]{2,})(?![\w-])")
_RUN = re.compile(r"(?<![A-Za-z\\._\d])(?<![A-Za-z]')([A-Z]?[a-z]{%d,})(?![A-Za-z_\d(])" % (GLUED_SHORTEST - 1))


def _rejoined(m: re.Match) -> str:
    left, right = m.group(1), m.group(2)
    whole = left + right
    if is_word(whole.lower()) and not (is_word(left.lower()) and is_word(right)):
        return whole
    return m.group(0)


def _unglued(m: re.Match) -> str:
    token = m.group(1)
    found = glued(token.lower())
    if found is None:
        return token
    out = " ".join(found)
    return out[0].upper() + out[1:] if token[0].isupper() else out


def run_together(text: str) -> str:
    """Every run-together token of text split in two (or three, around a rare word, or at a glued function
    word, `glued`), and a word broken at a line's end rejoined; everything else unchanged."""
    text = _BROKEN.sub(_rejoined, text)
    text = _CAMEL.sub(lambda m: m.group(0) if is_word(m.group(0).lower()) else f"{m.group(1)} {m.group(2)}", text)
    text = _GLUED_CAPITAL.sub(r"\1 ", text)

    def lower(m: re.Match) -> str:
        found = split_token(m.group(0)) or split_around(m.group(0))
        return m.group(0) if found is None else " ".join(found)

    return _RUN.sub(_unglued, _LOWER.sub(lower, text))


# Function words that lose their space upstream ('theattenuation', 'beenisothermal', 'thanabout'): a run
# with one of them is split into words wherever every piece is a word; a run without is left whole
# (science words and compounds are built from word-like pieces: 'hemo pneumothorax', 'mid face').
_GLUE = frozenset("the of and be been are is was were to in a an as that with for by on at from than or "
                  "into its it this these which".split())


@lru_cache(maxsize=4096)
def pieces(token: str) -> tuple[str, ...] | None:
    """The fewest words a lowercase token that is no word is made of (each a word of three letters or
    more, or a short function word), or None when it is a word or has no such split."""
    if is_word(token) or not GLUED_SHORTEST <= len(token) <= 40:
        return None  # a longer run is no sentence that lost its spaces ('xxxx...', a sequence)
    best: list[tuple[str, ...] | None] = [()] + [None] * len(token)
    for end in range(1, len(token) + 1):
        for start in range(max(0, end - 24), end):
            piece, head = token[start:end], best[start]
            if head is None or not (piece in _SHORT or (len(piece) >= 3 and is_word(piece))) or _two_glued(piece):
                continue
            if best[end] is None or len(head) + 1 < len(best[end]):
                best[end] = head + (piece,)
    out = best[-1]
    return out if out and len(out) > 1 and out[-1] not in _SHORT else None


def _two_glued(piece: str) -> bool:
    """'ofthe', 'inthe': listed as words (the list has such runs), but two function words."""
    return any(piece[:k] in _GLUE and piece[k:] in _GLUE for k in range(1, len(piece)))


def glued(token: str) -> tuple[str, ...] | None:
    """`pieces` of a run the normaliser splits: one with a glued function word and common words (one rare word
    of six letters or more may sit between: 'the attenuation')."""
    found = pieces(token)
    if not found or (len(token) < MIN_LENGTH and found[0] not in _GLUE):
        return None  # a short run splits only after a glued function word: 'thetop', 'itis'
    if any(len(p) < 4 and p not in _GLUE and ranks().get(p, COMMON) >= SHORT_COMMON for p in found):
        return None  # 'kilo hms': rare short pieces are how a split goes wrong
    rare = [p for p in found if p not in _GLUE and ranks().get(p, COMMON) >= COMMON]
    if any(p in _GLUE for p in found) and (not rare or (len(rare) == 1 and len(rare[0]) >= 6)):
        return found
    return None  # common pieces with no function word make compounds: 'midface', 'sociocultural'

"""The inventory check: every sign of the written turn is said, and nothing is said that it does not write.

`to_spoken` is total (every text has a spoken form), so a notation no pass reads right is not an
error there: it is deleted or misread, silently ('Q = 60 - P' said 'Q equals sixty P', '30 $Å$'
said 'thirty dollars angstroms'). This check is the guarantee behind it (docs/design.md, "Spoken
text"). It counts, per kind of mark, the marks of the written form (a minus sign, a slash between
units, a root, a power, a Greek letter...) and the words of the spoken form that say them ('minus',
'per', 'root'...), less the same words already written as words. A kind with fewer spoken words
than written marks is `unspoken_symbol`; a reading the written form does not justify ('dollars'
with no currency sign, 'about' for a logic '~', 'to the power of plus') is `ambiguous_notation`;
mojibake is `garbled_text`; a run of words glued together that stayed glued is `unsplit_words`.
A turn that fails is refused by the script step (kame_data/script/template.py `to_dialogue`).

Counting, not aligning: it is a lower bound (a mark whose word another mark's reading happens to
say goes unnoticed), and it never refuses a turn whose every mark is said.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from kame_data.text.compounds import glued, run_together
from kame_data.text.latex import known_command, without_math
from kame_data.text.numbers import NUMBER_WORD
from kame_data.text.prepare import ANGSTROM_CARET, mended
from kame_data.text.symbols import GREEK, LOGIC, prose_pair

# reason codes (records.Reject.reason), one per kind of failure
UNSPOKEN = "unspoken_symbol"
AMBIGUOUS = "ambiguous_notation"
GARBLED = "garbled_text"
UNSPLIT = "unsplit_words"
REASONS = (UNSPOKEN, AMBIGUOUS, GARBLED, UNSPLIT)


@dataclass(frozen=True)
class Problem:
    """Why a turn's spoken form is refused: a reason code, the kind of mark and where."""

    reason: str
    kind: str
    detail: str


@dataclass(frozen=True)
class Mark:
    """A kind of written mark and the spoken words that may say it."""

    kind: str
    written: re.Pattern
    said: re.Pattern


def _w(words: str) -> re.Pattern:
    return re.compile(rf"\b(?:{words})\b", re.IGNORECASE)


_OPERAND_END = r"(?:(?<=\d)|(?<=[)\]}])|(?<=[A-Za-z])(?<![A-Za-z][A-Za-z]))"  # a number, a bracket or a lone letter
_OPERAND_START = r"(?=\.?\d|[(\[√]|\\(?:frac|sqrt|left)|[A-Za-z](?![A-Za-z])|sqrt\b)"
# A minus sign, as opposed to a hyphen, a dash or a range: spaced between operands ('60 - P', '(p - 20)'),
# glued between a lone letter and a number or letter ('x-1', 'x-y', '2-x'), or in front of a number,
# a lone letter or a root where no operand precedes ('-5', '= -x', '-sqrt(34)', '(-1, 2)').
_MINUS = re.compile(
    rf"{_OPERAND_END}\s+-\s+{_OPERAND_START}"
    r"|(?<![A-Za-z\d])(?<=[a-z])-(?=\d|[a-z](?![A-Za-z]))|(?<![A-Za-z\d.])(?<=\d)-(?=[a-z](?![A-Za-z]))"
    rf"|(?:^|(?<=[\s(\[{{=<>,:;+*/×÷]))(?<!\^)(?<!\^\{{)-(?!\s){_OPERAND_START}")
# A negative power: '10^-5', 'mol^{-1}', and a unit's written without the caret ('J mol-1 K-1').
_NEGATIVE_POWER = re.compile(r"\^\s*\{?\s*-|\b(?:mol|K|s|m|g|kg|L|J|cm|yr|h|min|kJ)-(?=[1-4]\b)")
# A slash that is a rate or a division: not between two numbers (a fraction or a date, read by the
# numerals pass) and not between two words (prose: 'and/or', 'yes/no', said 'or'; `_written`).
_SLASH = re.compile(r"(?<!\b[nN])(?:(?<!\d)/|/(?!\d))(?!/)")  # not 'n/30', credit terms said 'net thirty'
_SOLIDUS_WORDS = re.compile(r"(?<![\w])([A-Za-z]{2,})/(?=([A-Za-z]{2,})(?![\w]))")
_CARET = re.compile(r"\^(?!\s*\{?\s*(?:-|\\circ|°|\*|\\ast|\d?[+-]\d?\s*\}?(?![\w(])|\d[+-]\s*\}?\())")

MARKS: tuple[Mark, ...] = (
    Mark("minus sign", _MINUS, _w("minus|negative")),
    Mark("negative power", _NEGATIVE_POWER, _w("minus|negative|per|inverse|reciprocal")),
    Mark("slash", _SLASH, _w("per|over|divided|out of|a|an|every")),
    Mark("power", _CARET, _w("squared|cubed|square|cubic|to the|power|raised")),
    Mark("root", re.compile(r"√|\\sqrt|\bsqrt\b"), _w("roots?")),
    Mark("angle", re.compile(r"∠|\\angle\b"), _w("angles?")),
    Mark("degree sign", re.compile(r"°|\\circ\b"), _w("degrees?|kelvin")),
    Mark("angstrom", re.compile(r"Å|\\AA\b"), _w("angstroms?")),
    Mark("percent sign", re.compile(r"%"), _w("percent|per cent|percentage")),
    Mark("plus sign", re.compile(r"\+(?!\+)"), _w("plus|positive|and")),
    Mark("equals sign", re.compile(r"(?<![<>!=])=(?![=>])"), _w("equals?|equal to|is|are|gives|makes|comes to|was|be")),
    Mark("relation", re.compile(r"[≤≥≠≈∝]|\\(?:leq?|geq?|neq?|approx|propto)\b"),
         _w("less|greater|more|fewer|not equal|approximately|proportional|at least|at most")),
    Mark("comparison", re.compile(r"(?<![<>-])\s[<>]\s(?![<>=])"), _w("less|greater|more|fewer")),
    Mark("integral", re.compile(r"∫|\\int\b"), _w("integral")),
    Mark("sum sign", re.compile(r"∑|\\sum\b"), _w("sum")),
    Mark("infinity", re.compile(r"∞|\\infty\b"), _w("infinity")),
    Mark("implication", re.compile(r"[⊃⇒→⟶]|\\(?:supset|Rightarrow|rightarrow|to|implies)\b"),
         _w("implies|then|to|gives|yields|becomes|goes|tends|maps|equilibrium")),
    Mark("disjunction", re.compile(r"∨|\\vee\b|\\lor\b"), _w("or")),
    Mark("conjunction", re.compile(r"∧|\\wedge\b|\\land\b"), _w("and")),
    Mark("negation", re.compile(r"¬|\\neg\b|\\lnot\b|(?<![\w~])~(?=\s*[A-Z(~¬]\b|\s*\()"), _w("not")),
    Mark("equivalence", re.compile(r"≡|\\equiv\b"), _w("equivalent|if and only if|congruent")),
    Mark("quantifier", re.compile(r"[∀∃]|\\(?:forall|exists)\b"), _w("for all|for every|there is|there are|exists?|some")),
)

_CONJUNCTION_DOT = re.compile(r"(?<=[\w)])\s*[·•]\s*(?=[\w(~])")
_TIMES_SIGN = re.compile(r"[×·*•]|\\(?:times|cdot)\b|(?<=\d)\s*x\s*(?=\d)")

# Readings a written form must justify: the words, and the marks or words that may have made them.
_CURRENCY = re.compile(r"\\?\$\s?[-+]?\.?\d|\d\s?\$(?![^\W\d_]|\\)|\\\$|\\textcent|[€£¥¢]"
                       r"|\b(?:USD|EUR|GBP|dollars?|cents?|bucks?)\b", re.IGNORECASE)
# '$4.95' is one reading: 'four dollars and ninety five cents'
_DOLLARS = re.compile(r"\bdollars?\b(?:\s+and\s+(?:[a-z]+\s+){1,4}?cents?\b)?|\b(?:cents?|bucks?)\b", re.IGNORECASE)
_APPROXIMATE = re.compile(r"[~∼]\s*[-+]?\$?\.?\d|\\sim\s*[-+]?\d|\babout\b", re.IGNORECASE)
_PRICE = re.compile(r"(?<![\\\d])\$\s?\.?\d")
# Two amounts with nothing but a space between ('$0 $75000', 'Total Assets $1,000,000 $2,000,000'): a table's
# row flattened into prose, which no reading says as its columns (issue 66's MMLU-Pro scan: 12 rows).
_SIDE_BY_SIDE = re.compile(r"(?<![\\\d])\$\s?[\d,]*\.?\d+\s+\$\s?\.?\d[\d,]*(?:\.\d+)?")
_DOLLAR_WORDS = _w("dollars?|cents?|bucks?")
_ABOUT = _w("about")
_TIMES = _w("times")
_POWER_OF = rf"(?:minus |negative )?(?:{NUMBER_WORD}|[A-Za-z]|{'|'.join(sorted(set(GREEK.values())))})\b"
_SPOKEN_POWER = re.compile(rf"\bto the power of (?!{_POWER_OF})(\w+)")
# Mojibake: UTF-8 read as Latin-1 or MacRoman ('â€™', 'Ã©', 'Äî'), and the replacement character.
_MOJIBAKE = re.compile(r"â€|Ã[\x80-\xbf©¨ª«®¯°±²³´µ¶·¸¹º»¼½¾]|Â[\xa0-\xbf]|Ä[îôù]|Ã¼|\ufffd"
                       r"|(?<![A-Za-z])ß(?=\s*-?\s*[a-z])")
_GLUED = re.compile(r"(?<![\w'])[a-z]{4,}(?![\w'])")
_COMMAND = re.compile(r"\\([A-Za-z]+)")
# Greek letters that are unit prefixes or units: 'μm' is 'micrometers', 'Ω' 'ohms'.
_GREEK_SAID = {"mu": r"mu\b|micro", "omega": r"omega\b|ohms?\b|kilohms?\b|megohms?\b"}


def _count(pattern: re.Pattern, text: str) -> int:
    return sum(1 for _ in pattern.finditer(text))


def _where(pattern: re.Pattern, text: str) -> str:
    m = pattern.search(text)
    return text[max(0, m.start() - 20): m.end() + 20].strip() if m else ""


def _written(text: str) -> str:
    """The written form as the marks are counted: minus signs and dashes in one spelling, prose
    solidi ('and/or') and `<a, b>` pairs out of the way."""
    text = re.sub(r"(?<=\d)\s*–\s*(?=\d)", " to ", text).replace("−", "-").replace("–", "-")
    text = ANGSTROM_CARET.sub(" Å", text)
    text = re.sub(r"\b(1\d{3}|20\d\d)\s*-\s*(?=(?:1\d{3}|20\d\d)\b)", r"\1 to ", text)  # years: a range
    text = run_together(text)  # 'thanabout' writes the word 'about'
    text = re.sub(r"(?<=\d)\s*/\s*(?=\d)", "/", text)  # '2 / 5', a fraction
    text = re.sub(r"(?<=[{$])~|~(?=\\)", " ", text)  # LaTeX's unbreakable space: '\\mathrm{~K}'

    text = _SOLIDUS_WORDS.sub(lambda m: f"{m[1]} or " if prose_pair(m[1], m[2]) else m[0], text)
    return re.sub(r"<[^<>]{1,40}>", " ", text)


@lru_cache(maxsize=8192)
def inventory_problem(written: str, spoken: str) -> Problem | None:
    """The first reason the spoken form of `written` cannot be published, or None when every mark
    of the written form is said and every reading of the spoken form is justified."""
    text = _written(written)
    return _garbled(written) or _unknown_commands(text) or _table_row(text) or _unspoken(text, spoken) \
        or _unjustified(text, spoken) or _unsplit(spoken)


def _garbled(written: str) -> Problem | None:
    mended_text = mended(written)  # what the normaliser reads: mojibake that ftfy and its rules could not mend
    if _MOJIBAKE.search(mended_text):
        return Problem(GARBLED, "mojibake", f"garbled characters in {_where(_MOJIBAKE, mended_text)!r}")
    return None


def _table_row(text: str) -> Problem | None:
    found = _SIDE_BY_SIDE.search(without_math(text))
    return Problem(AMBIGUOUS, "table row", f"amounts side by side with nothing between them, "
                   f"{found.group(0)!r}: a table flattened into prose") if found else None


def _unknown_commands(text: str) -> Problem | None:
    unknown = [c for c in _COMMAND.findall(text) if not known_command(c)]
    return Problem(AMBIGUOUS, "LaTeX command", f"no reading for \\{unknown[0]}") if unknown else None


def _unspoken(text: str, spoken: str) -> Problem | None:
    """A written mark with no spoken word that says it (words already written as words do not count)."""
    marks = MARKS + ((Mark("conjunction dot", _CONJUNCTION_DOT, _w("and")),) if LOGIC.search(text) else ())
    for mark in marks:
        need = _count(mark.written, text)
        if need and _count(mark.said, spoken) - _count(mark.said, text) < need:
            return Problem(UNSPOKEN, mark.kind, f"the {mark.kind} in {_where(mark.written, text)!r} is not said")
    prices = _count(_PRICE, without_math(text))  # '$500'; a formula's '$' pair is none ('$8.4 \\mathrm{km}$')
    if prices and _count(_DOLLAR_WORDS, spoken) - _count(_DOLLAR_WORDS, text) < prices:
        return Problem(UNSPOKEN, "dollar sign", f"a price in {_where(_PRICE, without_math(text))!r} is not said as money")
    for name in {GREEK[ch] for ch in text if ch in GREEK}:
        if not re.search(rf"\b(?:{_GREEK_SAID.get(name, name)})", spoken):
            return Problem(UNSPOKEN, "Greek letter", f"{name} is not said")
    return None


def _unjustified(text: str, spoken: str) -> Problem | None:
    """A reading no mark of the written form asks for: money, an approximation, a product in logic, a power."""
    if _count(_DOLLARS, spoken) > _count(_CURRENCY, text):
        return Problem(AMBIGUOUS, "dollar sign", f"'dollars' said with no currency in {text[:60]!r}")
    if _count(_ABOUT, spoken) > _count(_APPROXIMATE, text):
        return Problem(AMBIGUOUS, "tilde", f"'about' said for a '~' that is not an approximation in {text[:60]!r}")
    if LOGIC.search(text):
        products = _count(_TIMES, text) + _count(_TIMES_SIGN, text) - _count(_CONJUNCTION_DOT, text)
        if _count(_TIMES, spoken) > products:
            return Problem(AMBIGUOUS, "logic dot", f"'times' said for a conjunction in {text[:60]!r}")
    power = _SPOKEN_POWER.search(spoken)
    if power and "power of" not in text.lower():
        said = spoken[max(0, power.start() - 20):power.end()]
        return Problem(AMBIGUOUS, "caret", f"'to the power of {power.group(1)}' in {said!r}")
    return None


def _unsplit(spoken: str) -> Problem | None:
    runs = [w for w in _GLUED.findall(spoken) if glued(w)]
    if runs:
        return Problem(UNSPLIT, "run-together words", f"{runs[0]!r} is {' '.join(glued(runs[0]) or ())!r} run together")
    return None

"""Symbols and notation read as words, after numbers are spoken: chemical formulas and oxidation
states, function calls ('f(x)' -> 'f of x'), operators and logic signs, Greek letters, slashes."""

from __future__ import annotations

import re
import unicodedata

from kame_data.text.compounds import is_word
from kame_data.text.numbers import NUMBER_WORD
from kame_data.text.units import UNIT_WORDS

_SYMBOLS = {
    "+": " plus ", "=": " equals ", "×": " times ", "÷": " divided by ", "±": " plus or minus ",
    "≤": " less than or equal to ", "≥": " greater than or equal to ", "≠": " is not equal to ",
    "≈": " approximately ", "∝": " is proportional to ", "<": " less than ", ">": " greater than ",
    "&": " and ", "@": " at ", "√": " the square root of ", "∞": " infinity ", "→": " to ", "⟶": " to ",
    "←": " gets ", "⇒": " implies ", "⇔": " if and only if ", "↔": " if and only if ", "%": " percent ",
    "#": " number ", "*": " times ", "^": " to the power of ", "~": " about ", "∈": " in ", "∉": " not in ",
    "∨": " or ", "∧": " and ", "¬": " not ", "⊃": " implies ", "≡": " is equivalent to ", "∀": " for all ",
    "∃": " there is ", "∥": " concatenated with ", "∑": " the sum of ", "∫": " the integral of ", "∂": " partial ",
    "∇": " del ", "∠": " angle ", "′": " prime ", "″": " double prime ", "·": " times ", "§": " section ", "¢": " cents ",
    "€": " euros ", "£": " pounds ", "¥": " yen ", "°": " degrees ",
}


# A formula of propositional logic: a connective, or a '~' before a letter or a bracket that is no approximation.
LOGIC = re.compile(r"[⊃∨≡∧¬]|(?<![\w~])~\s*[A-Z(](?![a-z])")
# Unit symbols after which (or before which) a slash is 'per' (kame_data/text/units.py has their names).
UNIT_SYMBOLS = frozenset("kg g mg m cm mm km s ms h hr min yr mol kmol mmol L mL l J kJ W kW V A N Pa kPa MPa Hz K "
                         "lb lbm lbf ft in mi yd gal atm Btu cal kcal psi C F T Wb eV".split())


def _greek_name(ch: str) -> str:
    """The letter's name as said ('ά', GREEK SMALL LETTER ALPHA WITH TONOS, is 'alpha'; Unicode spells
    lambda 'LAMDA', which LaTeX's `\\lambda` and a reader do not)."""
    words = unicodedata.name(ch).split()
    name = words[words.index("LETTER") + 1].lower()
    return "lambda" if name == "lamda" else name


GREEK = {chr(c): _greek_name(chr(c)) for c in range(0x391, 0x3CA)
         if unicodedata.name(chr(c), "").startswith("GREEK") and "FINAL" not in unicodedata.name(chr(c), "")}


# Elements named with an oxidation state in Roman numerals: "iron(III) chloride", "Cu(II) ions". Names in
# either case, symbols and numerals as written ("such as (II)" and "lead (ii)" are labels, not states).
_VALENCE_NAMES = ("iron copper tin lead chromium manganese cobalt nickel mercury gold silver vanadium titanium "
                  "platinum palladium thallium cerium uranium molybdenum tungsten osmium ruthenium arsenic antimony "
                  "bismuth").split()
_VALENCE_SYMBOLS = "Fe Cu Sn Pb Cr Mn Co Ni Hg Au Ag V Ti Pt Pd Tl Ce U Mo W Os Ru As Sb Bi".split()
_ROMAN_STATES = {"I": "one", "II": "two", "III": "three", "IV": "four", "V": "five", "VI": "six", "VII": "seven",
                 "VIII": "eight"}
_OXIDATION_STATE = re.compile(r"\b((?i:" + "|".join(_VALENCE_NAMES) + r")|" + "|".join(_VALENCE_SYMBOLS)
                              + r") ?\((" + "|".join(sorted(_ROMAN_STATES, key=len, reverse=True)) + r")\)")


def oxidation_states(text: str) -> str:
    """'iron(III) chloride' -> 'iron three chloride', as chemists say it (Stock notation); read as
    it stood, the numeral was spelled out letter by letter or taken for a word."""
    return _OXIDATION_STATE.sub(lambda m: f"{m.group(1)} {_ROMAN_STATES[m.group(2)]} ", text)


def chemistry(text: str) -> str:
    """'CO2' -> 'C O 2', '13CH3' -> '13 C H 3': formulas are read element by element."""
    text = oxidation_states(text)

    def formula(m: re.Match) -> str:
        token = m.group(0)
        parts = re.findall(r"\d+|[A-Z][a-z]?", token)
        return " ".join(parts)

    return re.sub(r"\b\d*(?:[A-Z][a-z]?\d*){1,6}\b", lambda m: formula(m) if re.search(r"[A-Z][a-z]?\d", m.group(0))
                  and not re.fullmatch(r"[A-Z]\d+", m.group(0)) else m.group(0), text)


def functions(text: str) -> str:
    """'f(x)' -> 'f of x', 'Θ(n log n)' -> 'Θ of n log n'."""
    text = re.sub(r"\bsqrt\s*\(([^()]*)\)", r" the square root of \1 ", text)
    return re.sub(r"(?<![\w'])([A-Za-zΑ-Ωα-ω])\(([^()]{1,30})\)", r"\1 of \2", text)


_FORMULA = re.compile(r"\b(?:equals|given by|formula|ratio of|divided)\b")
_MONEY = frozenset("dollar dollars cent cents euro euros pound pounds yen penny pence".split())


def _solidus(m: re.Match) -> str:
    """A slash between letters: 'or' between two words ('and/or', 'DiGeorge/Shprintzen'), 'per' after or
    before a unit ('H two O/kmol'), else 'over', a division ('PQ/V', 'r/R')."""
    left, right = m.group(1), m.group(2)
    if {left, right} <= {"a", "an"}:
        return f"{left} or "  # 'a/an'
    if left in _MONEY:
        return f"{left} per "  # '$10/point' is ten dollars a point
    units = [w in UNIT_SYMBOLS or (len(w) > 1 and w in UNIT_WORDS) for w in (left, right)]
    if units[0] and not units[1] and re.fullmatch(NUMBER_WORD, right):
        return f"{left} over "  # 't squared/two' is a division, not a rate
    if all(units) or any(u and len(w) > 1 for u, w in zip(units, (left, right))):
        return f"{left} per "
    if left == "and" and right == "or":
        return "and "
    formula = _FORMULA.search(m.string)  # 'speed is given by distance / time': a division, not 'or'
    return f"{left} or " if prose_pair(left, right) and not formula else f"{left} over "


_NUMBER_OR_LETTER = re.compile(rf"{NUMBER_WORD}|{'|'.join(sorted(set(GREEK.values())))}", re.IGNORECASE)


_SHORT_PROSE = frozenset("no or on in up he we us me my".split())  # 'yes/no', 'on/off', 'he/she'


def prose_pair(left: str, right: str) -> bool:
    """Two words or names on either side of a slash: prose ('and/or', 'detection/recognition',
    'DiGeorge/Shprintzen'), said 'or'; not symbols or units."""
    return all((len(w) > 2 or w.lower() in _SHORT_PROSE) and w not in UNIT_SYMBOLS and not _NUMBER_OR_LETTER.fullmatch(w) and (is_word(w.lower()) or (w[0].isupper() and not w.isupper()
                                                                               and len(w) > 3)) for w in (left, right))


def logic(text: str) -> str:
    """A formula of propositional logic says its connectives as logicians do: '~' is 'not' and '·' is
    'and' ('(T · ~U) ⊃ ~W'), where elsewhere they are 'about' and 'times' (a '~' between two names is
    'is similar to', kame_data/text/prepare.py `signs`)."""
    if LOGIC.search(text):
        text = re.sub(r"(?<=[\w)])\s*[·•]\s*(?=[\w(~¬])", " and ", text)
        return re.sub(r"~\s*(?=[\w(~¬])", " not ", text)
    return text


def symbols(text: str) -> str:
    text = logic(text)
    text = re.sub(r"(?<![\w-])([a-z])\s?-\s?([a-z])(?![\w-])|(?<![\w-])([A-Z])\s-\s([A-Z])(?![\w-])",
                  lambda m: f"{m.group(1) or m.group(3)} minus {m.group(2) or m.group(4)}", text)  # x-y, X - Y
    text = re.sub(r"(?<=\w)\s*\|\|\s*(?=\w)", " ∥ ", text)
    if not re.search(r"\|\s*\|", text):  # 'Zn | Zn^2+ || Cu': a cell's phase boundaries, no absolute value
        text = re.sub(r"(?<![\w|])\|([^|\n]{1,30})\|(?![\w|])", r" the absolute value of \1 ", text)
    text = re.sub(r"(?<=[A-Za-z0-9])•", " dot ", text)
    text = text.replace("•", " and ")
    for k in sorted(_SYMBOLS, key=len, reverse=True):
        text = text.replace(k, _SYMBOLS[k])
    for ch, name in GREEK.items():
        if ch in text:
            text = re.sub(rf"{ch}", f" {name} ", text)
    text = re.sub(r"\s*/\s*(?=(?:year|month|week|day|hour|minute|second|person|piece|unit|item|gallon|mile|pound|"
                  r"kilogram|meter|foot|liter|ounce)s?\b)", " per ", text)
    text = re.sub(r"([A-Za-z]+)\s*/\s*(?=([A-Za-z]+))", _solidus, text)
    return text.replace("/", " over ")

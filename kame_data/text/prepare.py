"""The first passes: put raw benchmark text in a form the later passes read right.

Characters (vulgar fractions, superscripts, circled numbers, MacRoman mojibake, dashes), signs
whose meaning depends on their neighbours (a price, a negative number, a factorial, a formula's
subscripts), GSM8K's calculator notes and answer marks, abbreviations ('e.g.', 'Dr.') and asides in
brackets (a gloss such as "(NSC)", a parenthetical remark).
"""

from __future__ import annotations

import re
import unicodedata
from fractions import Fraction

import ftfy

from kame_data.text.numbers import NAMED_DIGITS, cardinal, say_digits

_CIRCLED = {chr(0x2460 + i): i + 1 for i in range(20)}
_CIRCLED.update({chr(0x3251 + i): i + 21 for i in range(15)})
_ABBREVIATIONS = {
    "e.g.": "for example", "i.e.": "that is", "etc.": "et cetera", "vs.": "versus", "approx.": "approximately",
    "Dr.": "Doctor", "Mr.": "Mister", "Mrs.": "Missus", "Ms.": "Miz", "Fig.": "figure",
    "Ph.D.": "P H D", "cf.": "compare", "et al.": "and others",
}


def clean(text: str) -> str:
    """Characters first: vulgar fractions, superscripts, circled numbers, mojibake quotes, dashes."""
    for ch, digits in (("½", "1/2"), ("⅓", "1/3"), ("⅔", "2/3"), ("¼", "1/4"), ("¾", "3/4"), ("⅛", "1/8")):
        text = re.sub(rf"(\d)\s*{ch}", rf"\1 {digits}", text).replace(ch, f" {digits} ")
    text = text.replace("⁻¹", "^-1").replace("²", "^2").replace("³", "^3").replace("¹", "^1")
    text = re.sub("[" + "".join(_CIRCLED) + r"]+(?:\s*[-—–]\s*[" + "".join(_CIRCLED) + "]+)?",
                  lambda m: ", " + _circled(m.group(0)) + ", ", text)
    # Quotes and apostrophes decoded as MacRoman in some MMLU-Pro rows ("nurseÕs", "ÒI was fired ...Ó").
    text = re.sub(r"(?<=[A-Za-z])Õ(?=[a-z])", "'", text)
    text = re.sub(r"Ò(?=\S)|(?<=\S)Ó", '"', text)
    text = mended(text)
    text = unicodedata.normalize("NFKC", text)
    text = numeric_characters(text)
    if not text.isprintable():
        text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"').replace("…", "...")
    text = text.replace("−", "-").replace("‐", "-").replace("‑", "-").replace("\u2044", "/")
    text = re.sub(r"(?<=\d)\s*[–—]\s*(?=\$?\d)", _dash, text)
    # an en dash glued to a number where no number precedes is its minus sign: '(–2, 3)', '= –3', 'of –10°C'
    text = re.sub(r"(?<![^\s(\[=,:<>])–(?=\$?\.?\d)", "-", text)
    # a spaced en dash between operands, one a lone letter or a bracket, is a minus: '1 – P(X = 0)', 'x – 3'
    text = re.sub(r"(?:(?<=[\d)\]])|(?<=[A-Za-z])(?<![A-Za-z][A-Za-z]))\s+–\s+(?=[A-Za-z](?![A-Za-z])|[(\[])", " - ", text)
    text = re.sub(r"(?<=[A-Za-z])(?<![A-Za-z][A-Za-z])\s+–\s+(?=\d)", " - ", text)
    return text.replace("–", ", ").replace("—", ", ")


# UTF-8 punctuation read as MacRoman whose first byte was lost ('Äî' for an em dash), and a German
# sharp s standing for a beta before a chemical name ('ß-carotene', 'ß-oxidation').
_MACROMAN_TAILS = {"Äî": " — ", "Äì": " – ", "Äô": "'", "Äò": "'", "Äú": '"', "Äù": '"', "Ä¢": " • ", "Ä¶": "..."}


def mended(text: str) -> str:
    """Text decoded with the wrong codec, mended: ftfy's repair of whole sequences ('â€™', 'Ã©'), then
    the MacRoman tails ftfy cannot see and the beta written as 'ß'."""
    if text.isascii():
        return text
    text = ftfy.fix_encoding(text)
    for bad, good in _MACROMAN_TAILS.items():
        text = text.replace("‚" + bad, good).replace(bad, good)
    return re.sub(r"(?<![A-Za-z])ß(?=\s*-?\s*[a-z])", "β", text)


def numeric_characters(text: str) -> str:
    """Numbers every later pass can read: a digit of any script ('٣') is its ASCII digit, another
    numeric character NFKC leaves ('௰', '〇') is its value ('10', '1/2'), and a run of more digits
    than a number name covers is said digit by digit (the passes only meet numbers they can name)."""
    if not text.isascii():
        text = re.sub(r"[^\x00-\x7f]", _numeric_value, text)
    return re.sub(rf"\d(?:,?\d){{{NAMED_DIGITS},}}", lambda m: f" {say_digits(m.group(0))} ", text)


def _numeric_value(m: re.Match) -> str:
    ch = m.group(0)
    if not unicodedata.category(ch).startswith("N"):
        return ch
    if unicodedata.category(ch) == "Nd":
        return str(unicodedata.digit(ch))
    value = unicodedata.numeric(ch, None)
    if value is None:
        return " "
    value = Fraction(value).limit_denominator(1000)
    return f" {value.numerator} " if value.denominator == 1 else f" {value.numerator}/{value.denominator} "


def _dash(m: re.Match) -> str:
    """A dash between numbers: minus in a sum ('22 – 7 = 15', '= 28 – 4'), else a range ('1914–1918')."""
    text = m.string
    start = max(text.rfind(".", 0, m.start()), text.rfind("\n", 0, m.start())) + 1
    end = re.search(r"(?:[.?!](?!\d)|\n|$)", text[m.end():])
    clause = text[start: m.end() + end.start()]
    return " - " if re.search(r"[=+×*÷]", clause) else " to "


def _circled(marks: str) -> str:
    nums = [cardinal(_CIRCLED[ch]) for ch in marks if ch in _CIRCLED]
    if any(ch in "-—–" for ch in marks):
        return " to ".join(nums)
    return nums[0] if len(nums) == 1 else ", ".join(nums[:-1]) + " and " + nums[-1]


# An ion's charge after its formula: 'SO4^2-', 'Fe^{3+}', 'NO2-', 'NH4+' (not '10^-5', where a number follows).
_ION = re.compile(r"\b((?:[A-Z][a-z]?\d*)+)(?:\^\{?(\d?)([+-])\}?|([+-]))(?=[\s\]),.;:]|$)")


# An electron configuration's shells ('1s^2 2s^2 2p^6': 'one s two, ...', never 'one second squared') and an
# orbital named before its noun ('the 2s orbital', 'the 4s subshell': 'two s', not 'twos' or 'two seconds').
_SHELL = re.compile(r"\b([1-7])([spdf])\s*\^\s*\{?\s*(\d{1,2})\s*\}?")
# a configuration is two shells or more, or a noble gas core and a shell ('3s^2 + 17s' is algebra)
_CONFIGURATION = re.compile(rf"(?:\[(?:He|Ne|Ar|Kr|Xe|Rn)\]\s*|\b[1-7][spdf]\s*\^\s*\{{?\s*\d{{1,2}}\s*\}}?\s*)"
                            rf"(?:\$?\s*{_SHELL.pattern}\s*)+")
_ORBITAL = re.compile(r"\b([1-7])([spdf])(?=\s+(?:orbitals?|electrons?|subshells?|sub-shells?|shells?|sublevels?|"
                      r"levels?|states?|and\s+[1-7][spdf]\b))")
# A point or a pair of numbers in brackets, '(0, 0), (-1, 1)': said 'zero comma zero, minus one comma one',
# so that a list of points keeps its pairs ('1,000' is a number: a comma followed by three digits and no space).
_NUMBER = r"(-?\d+(?:\.\d+)?)"
_POINT = re.compile(rf"(?<!\$)\(\s*{_NUMBER}\s*,(?:\s+|(?!\d{{3}}\b))\s*{_NUMBER}"
                    rf"(?:\s*,(?:\s+|(?!\d{{3}}\b))\s*{_NUMBER})?\s*\)")


def _charge(m: re.Match) -> str:
    """'SO4^2-' -> 'SO4 2 minus': said after the formula, never as a power ('squared') or dropped."""
    sign = " minus" if (m.group(3) or m.group(4)) == "-" else " plus"
    return f"{m.group(1)} {m.group(2) or ''}{sign}".replace("  ", " ")


def _tuple(m: re.Match) -> str:
    """'<0,1>', an edge of a graph (MMLU-Pro's 'E = {<0,1>,<4,1>}'), is said 'zero one': a pair's two
    names run together, so that the commas between edges are what a listener hears as the breaks; a
    longer tuple ('<1, -2, 3>', a vector) keeps its commas. Never 'less than ... greater than'."""
    items = [x.strip() for x in m.group(1).split(",")]
    return " " + (" ".join(items) if len(items) == 2 and all(x.isalnum() for x in items) else ", ".join(items)) + " "


# The angstrom written as an A with a degree sign raised after a number ('2750 A^°').
ANGSTROM_CARET = re.compile(r"(?<=\d)\s*A\s*\^\s*\{?\s*(?:°|\\circ)(?:\s*\})?")


# Units with a power written without the caret: 'J mol-1 K-1', 's-1 mol L-1', '250 rad s-1'.
_UNIT = r"(?:J|kJ|W|g|kg|m|cm|s|L|cal|kcal|mol|K|T|h|yr|min|rad|Pa|N|V|A|Hz)"
_UNIT_RUN = re.compile(rf"(?<![\w^-])({_UNIT}(?:-[1-4])?(?:\s+{_UNIT}(?:-[1-4])?)*)(?![\w^-])")


def _unit_powers(m: re.Match) -> str:
    """A run of unit symbols with at least one power, after a number or two units long, said with the caret."""
    units = m[1].split()
    after_number = bool(re.search(r"\d\s*$", m.string[:m.start()]))
    if "-" not in m[1] or not (after_number or len(units) > 1):
        return m[0]
    return re.sub(r"-([1-4])\b", r"^-\1", m[1])


def superscripts(text: str) -> str:
    """Raised marks a reader says: a sign with nothing after it is a charge or a one-sided limit ('mu^-',
    'e^{-}', 'gal^+', 't = 0^+', 'Zn^+2'); '^°' after a number's A is the angstrom ('150 A^°'), elsewhere a
    degree sign; '^*' is 'star' ('P_A^*', '6-31G^*'); a unit's power written without the caret ('J mol-1
    K-1', read 'per mole per kelvin' by the units pass); a power of ten whose superscript was lost after
    a mantissa of scientific notation ('2.7 × 108 m/s')."""
    text = ANGSTROM_CARET.sub(" Å", text)
    text = re.sub(r"\^\s*\{?\s*°\s*\}?", "°", text)
    text = re.sub(r"\^\s*\{?\s*\*\s*\}?", " star ", text)
    text = re.sub(r"(?:(?<=[A-Z])|(?<=[A-Z][a-z]))\^\s*\{?\s*([+-])\s*(\d)\s*\}?(?![\d.])",
                  lambda m: f" {m[2]} {'plus' if m[1] == '+' else 'minus'} ", text)
    text = re.sub(r"(?<=[\w}])\s*\^\s*\{?\s*([+-])\s*\}?(?![\w({\\])", lambda m: " plus" if m[1] == "+" else " minus",
                  text)
    text = _UNIT_RUN.sub(_unit_powers, text)
    return re.sub(r"(?<![\d.])(\d\.\d+\s*[×x]\s*)10([1-9]\d?)(?![\d.])(?!\s*[=+*/-])", r"\g<1>10^\2", text)


def minus_signs(text: str) -> str:
    """A minus sign where a hyphen's rules would drop it: in front of a root, a bracket or a lone letter
    ('-sqrt(34)', '-(x + 1)', '-x + y'), spaced between operands where one is a letter or a bracket
    ('Q = 60 - P', '(p - 20)', '4 - j2'; number - number is the arithmetic pass's), and an axis's sign
    ('the -x-direction', 'negative x')."""
    text = re.sub(r"(?<![\w-])-([xyz])(?=[-\s]?(?:direction|axis|axes|component))-?", r"negative \1 ", text)
    text = re.sub(r"(?:^|(?<=[\s(\[{=<>,:;]))-\s?(?=sqrt\b|√|\\sqrt|\\frac|\(|[a-z](?![A-Za-z]))", " minus ", text)
    operand_end = r"(?:(?<=[)\]}])|(?<=[A-Za-z])(?<![A-Za-z'][A-Za-z])"
    text = re.sub(operand_end + r"|(?<=\d))\s+-\s+(?=[(\[]|[A-Za-z](?:\d|(?![A-Za-z'])))", " minus ", text)
    return re.sub(operand_end + r")\s+-\s+(?=\d)", " minus ", text)


def signs(text: str) -> str:
    """'\\$5' is a price; '- 10°C' after a word, or at the start, is a negative number; 'N_2O_4'
    is a formula (read 'N two O four'); '30!' is a factorial."""
    text = re.sub(r"(?<![\\{a-z])([A-Z][a-z]?)_(\d+)(?![\d}])", r"\1\2", text)
    text = text.replace("<=>", " ⇔ ").replace("->", " → ").replace("=>", " ⇒ ")
    text = re.sub(r"(?<=[\w)\]])\s*<=\s*(?=[-\w(])", " ≤ ", text)  # 'IF X1 <= 0'
    text = re.sub(r"(?<=[\w)\]])\s*>=\s*(?=[-\w(])", " ≥ ", text)
    text = minus_signs(superscripts(text))
    text = re.sub(r"(?<=[A-Za-z])\s+~\s+(?=[A-Za-z])", " is similar to ", text)  # 'polygon ABCDE ~ polygon PQRST'
    text = _ION.sub(_charge, text)
    text = _CONFIGURATION.sub(lambda m: _SHELL.sub(lambda s: f" {cardinal(int(s[1]))} {s[2]} {cardinal(int(s[3]))} ",
                                                   m[0]), text)  # '[Ar] 4s^2 3d^10'
    text = _ORBITAL.sub(lambda m: f"{cardinal(int(m[1]))} {m[2]}", text)  # 'the 2s orbital'
    text = _POINT.sub(lambda m: " " + " comma ".join(g for g in m.groups() if g) + " ", text)
    # 'X1 = -X1', '(-x)': a sign, not a dash ('(-OH)', a group's bond, stays)
    text = re.sub(r"(=)\s*-(?=[A-Za-z(])|(\()\s*-(?=[a-z(])", lambda m: f"{m.group(1) or m.group(2)} minus ", text)
    text = re.sub(r"(?<![^\s{(\[,=:])<([A-Za-z0-9]{1,4}(?:\s*,\s*-?[A-Za-z0-9.]{1,6}){1,3})>(?![\w=])",
                  _tuple, text)
    text = re.sub(r"\b(\d+)!(?=\s+[a-z]|\s*[,;)]|\s*$)", r"\1 factorial", text)
    text = re.sub(r"(\bsqrt\s*\([^()]*\))\s*/\s*(?=\d)", r"\1 ÷ ", text)  # 'sqrt(2)/8', not 'two eighths'
    text = re.sub(r"(?<![\d.])(\d+)\(\s*(\d+)\s*/\s*(\d+)\s*\)(?!\s*[=*×/])",  # '1(1/2) in.': a mixed number
                  lambda m: f"{m.group(1)} {m.group(2)}/{m.group(3)}" if int(m.group(2)) < int(m.group(3))
                  else m.group(0), text)
    text = re.sub(r"(?<![\w(/*+=^.$-])(?<![-+*/=]\s)(?<!minus )(?<!plus )(\d{1,2})\)\s+(?=[A-Za-z])", r", \1, ", text)  # "1) Guyana 2) Ecuador": a list
    text = re.sub(r"(?<=[A-Za-z0-9])•", " dot ", text)  # a radical: "CH3•"
    text = re.sub(r"\bet al\.'s", "and colleagues'", text)
    # a blood pressure, '135/90 mm Hg', is said 'one hundred and thirty five over ninety', never a division
    text = re.sub(r"\b(\d{2,3})\s*/\s*(\d{2,3})(?=\s*mm\s*Hg\b)", lambda m: f"{m[1]} over {m[2]}", text)
    text = re.sub(r"\bmm\s+Hg\b", "mmHg", text)
    text = re.sub(r"\bsq\.?\s?ft\b\.?", "square feet", text)
    text = re.sub(r"\bcu\.?\s?(in|ft|yd|cm|mm|m)\b(?:\.(?!\s+[A-Z]|\s*$))?", "\\1³", text)  # 'lb/cu in.': a cubic inch
    text = re.sub(r"\b(in|ft|lb|lbs|oz|yd|mi|sec|min|hr)\.\s*/\s*(?=[a-z])", r"\1/", text)  # '40 in./sec'
    text = re.sub(r"\blog\s*_\s*\{?\s*(\d+|e)\s*\}?\s*(?=[\w(])", r"log base \1 of ", text)  # 'log_10 3'
    text = re.sub(r"\\\$\s?(?=\d)", "$", text)
    text = re.sub(r"\b(at|to|of|is|be|from|and|or|by|was|were|are|about|equals?|between)\s+-\s+(?=\d)", r"\1 -", text)
    text = re.sub(r"([,;:(])\s*-\s+(?=\d)", r"\1 -", text)  # "A, - 12.37 Btu/hr": a negative option
    return re.sub(r"^\s*-\s+(?=\d)", "-", text)


def products_and_rates(text: str) -> str:
    """A slash or a bracket between quantities: '$20/hour' and '25 roses/bush' are rates ('per'),
    '(5280 feet/1 mile)' too; '300g/5' and '$17/$8.50' are divisions; '4(100)' and '(3)(4)' are
    products. Bare fractions ('3/4') and words ('delivery/tip') are left to later passes."""
    text = re.sub(r"(?<=\d)\((?=\s*[\d.$])", " × (", text)
    text = re.sub(r"(\(\s*\$?[\d.][^()]*\))\s*\((?=\s*[\d.$])", r"\1 × (", text)
    # two bracketed sums side by side multiply: '(x-y)(x+y)', '(s + 2)(s^2 + 4s + 29)'
    text = re.sub(r"(\([^()]*\w\s*[-+*/^]\s*\w[^()]*\))\s*(?=\([^()]*\w\s*[-+*/^]\s*\w[^()]*\))", r"\1 × ", text)
    rate = (r"(\$\s?[\d.,]*\d%?|\d%?\s*(?!(?:in|of|on|at|for|to|and|or|the|a|an|per)\b)[A-Za-z]+)"
            r"(?:/(?:1\s+)?|\s+/\s+)([a-z]{3,})\b(?!\s+(?!(?:together|each|in|on|at|for|and|or|but|so|to|from|"
            r"with|than|over|during|every|a|an|the|is|are|was|were|which|that|if|when|then|times|plus|minus)\b)"
            r"[a-z]+\b)")  # not 'a delivery/tip fee': a word after it makes it a compound
    text = re.sub(rate, lambda m: m.group(0) if m.group(2) in _UNIT_WORDS else f"{m.group(1)} per {m.group(2)}", text)
    return re.sub(r"((?:\$\s?[\d.,]*\d|\d[\d.,]*\s*[A-Za-z]+))\s*/\s*(?=\(?\s*\$?\d)|(\d)\s*/\s*(?=\(?\s*\$\d)",
                  lambda m: f"{m.group(1) or m.group(2)} ÷ ", text)


# Credit terms: "2/10, n/30" is a 2% discount within 10 days, the net amount due in 30. Said as
# accountants say it, "two ten, net thirty", not "two tenths, n over thirty" (MMLU-Pro business rows
# write "(2/10), (n/30)"); the net days are more than the discount's. A lone "n/30" is a term only
# after "terms": "n/2 pairs" stays a division.
_TERMS = re.compile(r"\(?(?<![\w/.])(\d{1,2}(?:\.\d+)?)/(\d{1,3})\)?\s*,?\s*\(?[nN](?:et)?\s*/\s*(\d{2,3})\b\)?")
_NET_TERMS = re.compile(r"\b([Tt]erms?(?:\s+(?:of|are|were|is|was))?:?\s+)\(?[nN](?:et)?\s*/\s*(\d{1,3})\b\)?")


def credit_terms(text: str) -> str:
    """'(2/10), (n/30)' -> '2 10, net 30' (the numbers are read by later passes)."""
    text = _TERMS.sub(lambda m: f"{m[1]} {m[2]}, net {m[3]}" if int(m[3]) > int(m[2]) else m[0], text)
    return _NET_TERMS.sub(lambda m: f"{m[1]}net {m[2]}", text)


# Unit symbols the units pass reads itself ('g/mol', 'km/min'), so 'per' is not put in before it.
_UNIT_WORDS = {"mol", "mole", "min", "sec", "hr", "hrs", "cal", "kcal", "atm", "mph", "kwh"}


def gsm8k_notes(text: str) -> str:
    text = re.sub(r"<<[^<>]*>>", " ", text)  # calculator notes
    return re.sub(r"####\s*", " The answer is ", text)


_ABBREVIATION_RE = re.compile(r"(?<![A-Za-z])(?:" + "|".join(re.escape(k) for k in sorted(_ABBREVIATIONS, key=len, reverse=True)) + ")")


# Dotted initialisms ("U.S.A.", "D.C.", "J.K.", "a.m."): said letter by letter. Their last dot also
# ends the sentence where the text ends or a word that opens sentences follows ("... in the U.S. It
# was"), not before a name ("U.S. Supreme Court", "J.K. Rowling").
_INITIALISM_RE = re.compile(r"(?<![\w.])((?:[A-Za-z]\.){2,})(?![\w])")
_OPENS_SENTENCE = re.compile(r"\s+(?:The|This|That|These|Those|It|Its|If|In|On|At|As|For|What|Which|Who|When|Where|"
                             r"Why|How|He|She|They|We|You|I|A|An|But|And|So|Then|There|After|Before)\b")


def _initialism(m: re.Match) -> str:
    letters = " ".join(c for c in m.group(1) if c != ".").upper()
    rest = m.string[m.end():]
    return letters + ("." if not rest.strip() or _OPENS_SENTENCE.match(rest) else "")


# "No." is "number" only before one ("No. 5"); elsewhere it is the word no ("It's F, No.", an MMLU-Pro option).
_NUMBER_SIGN_RE = re.compile(r"(?<![A-Za-z])No\.(?=\s*\d)")


def abbreviations(text: str) -> str:
    text = _ABBREVIATION_RE.sub(lambda m: _ABBREVIATIONS[m.group(0)], text)
    text = _NUMBER_SIGN_RE.sub("number", text)
    return _INITIALISM_RE.sub(_initialism, text)


# A bracketed aside of two or more plain words after a word: "the next (with equal probability).".
_ASIDE_RE = re.compile(r"(?<=[\w)])\s+\(([A-Za-z][A-Za-z' ,-]* [A-Za-z' ,-]*[A-Za-z])\)(?=[\s.,;:?!]|$)")


def asides(text: str) -> str:
    """A bracketed aside of words is said between commas, as a reader pauses around it; without
    them its words ran into the sentence ("the next with equal probability", "An ARMA p, q p, q
    are integers bigger than zero model"). Brackets around numbers, a formula or one word
    (a function's argument, an acronym, an option's label) are left to the later passes."""
    return _ASIDE_RE.sub(lambda m: f", {m.group(1)},", text)


# An acronym in brackets right after the words it stands for: "the National Security Council (NSC)".
_GLOSS_RE = re.compile(r"(?<=\w)\s+\(([A-Z][A-Z0-9&]{1,7})(s?)\)(?=([\s,;:]|[.?!](?:\s|$)|$))")
_GLOSS_SKIPPED = frozenset("of and for the on in to a an at by with from &".split())
_ROMAN_RE = re.compile(r"[IVXLCDM]+")


def _stands_for(letters: str, before: str) -> bool:
    """Whether `letters` are the initials of the words that end `before` (function words may be
    skipped, hyphenated parts count as words): 'GDP' after 'Gross domestic product'."""
    words = [w for w in re.split(r"[\s-]+", before)[-12:] if w]
    i, j = len(letters) - 1, len(words) - 1
    while i >= 0 and j >= 0:
        w = words[j].lower()
        if w[0] == letters[i]:
            i -= 1
        elif w not in _GLOSS_SKIPPED:
            return False
        j -= 1
    return i < 0


def _gloss(m: re.Match) -> str:
    acronym = m.group(1)
    if _ROMAN_RE.fullmatch(acronym) or not _stands_for(acronym.lower(), m.string[: m.start()]):
        return m.group(0)
    ends = m.group(3) == "" or m.group(3)[0] in ".?!,;:"
    return f", or {acronym}{m.group(2)}" + ("" if ends else ",")


def glosses(text: str) -> str:
    """An acronym in brackets after the words it abbreviates is said as a reader says it, "the
    National Security Council, or NSC, met": read inline it ran into the sentence ("the National
    Security Council NSC met"). Brackets whose letters are not those words' initials (a label, a
    Roman numeral, "the supply (NSC) curve") are left as they are."""
    return _GLOSS_RE.sub(_gloss, text)

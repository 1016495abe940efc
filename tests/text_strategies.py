"""Generators of benchmark-like text: the notation the normaliser reads (numbers, signs,
fractions, units, money, dates, LaTeX, symbols) mixed with real words, and source items with
option lists of 0 to 40 entries.

Each generator is written once against `Chooser` (pick one of, a number in a range, a run of
characters) and driven two ways: by hypothesis (`texts`, `source_items`: the fixed-seed property
tests in tests/text/test_text_totality.py, which shrink a failure to a small example) and by
`random.Random` (`RandomChooser`: benchmarks/fuzz_text.py, a million inputs, where hypothesis'
per-example cost would be too high). The atoms are small on purpose: the crashes the issue reports
come from notations that meet ('-3/4 km/h', '$-1/2', '5 1/2°C'), so a text is a short run of atoms
joined by the separators benchmark text uses.
"""

from __future__ import annotations

import random
from typing import Callable, Protocol, Sequence, TypeVar

from hypothesis import strategies as st

from kame_data.records import LETTERS, FollowUp, SourceItem

T = TypeVar("T")

WORDS = ("the", "a", "of", "in", "at", "by", "from", "to", "per", "and", "or", "is", "total", "ratio", "line",
         "option", "year", "since", "between", "cost", "price", "each", "long", "later", "solution", "x", "y",
         "n", "m", "f", "C", "K", "T", "I", "A", "B", "answer", "What", "How many", "apples", "miles", "people",
         "e.g.", "i.e.", "Dr.", "No.", "a.m.", "p.m.", "PM", "AM", "BC", "AD", "o'clock", "minus", "plus",
         "times", "over", "CO", "H", "O", "Na", "Cl", "sqrt", "log", "sin", "January", "March", "Dec.", "the 1980s",
         "It's", "don't", "café", "Ångström", "naïve", "Émile", "straße", "日本", "мир")
SIGNS = ("+", "-", "±", "−", "–", "—", "‐", "‑", "∓", "+-", "--", "-+")
UNITS = ("km/h", "°C", "°F", "° C", "°", "µm", "μm", "Å", "Å", "kg·m/s²", "kg m/s^2", "%", "‰", "m", "cm",
         "in", "in.", "ft", "s", "h", "hr", "min", "g", "kg", "mg", "mol", "mole", "J/mol", "cal/mole", "kJ",
         "eV", "Hz", "MHz", "K", "°K", "N", "Pa", "atm", "mmHg", "Ω", "kΩ", "μF", "L", "mL", "ml", "m/s", "ft/s",
         "mi/h", "mph", "lb", "lbs", "oz", "Btu/hr", "W", "kWh", "V", "A", "C", "M", "dB", "rev/s", "g/mol",
         "m^-1", "J K^-1", "s^{-1}", "m²", "cm³", "m^2", "km^3", "/hr", "/ft", "pm", "nm", "GB", "MB", "x")
CURRENCIES = ("$", "€", "£", "¥", "\\$", "US$", "¢")
SCALES = ("", " million", " billion", " thousand", " Million", " trillion")
LATEX = ("\\frac{1}{2}", "\\frac{a}{b}", "\\frac{-3}{4}", "\\frac{1}{\\frac{2}{3}}", "\\dfrac12", "\\frac{",
         "\\sqrt{2}", "\\sqrt[3]{8}", "\\sqrt[0]{x}", "x^{2}", "x^2", "10^{-7}", "10^-3", "e^{i\\pi}", "a_{n}",
         "x_1", "\\alpha", "\\Delta H", "\\times", "\\cdot", "\\pm", "\\leq", "\\infty", "\\mathrm{H}_2",
         "\\mathrm{~kg}", "\\text{m/s}", "\\left(", "\\right)", "{", "}", "$", "$$", "\\[", "\\]", "\\(", "\\)",
         "^{\\circ}C", "^\\circ", "\\%", "\\$", "\\\\", "\\unknown{x}", "\\nactorial{n}", "n!", "\\hat{x}",
         "\\vec{F}", "\\{1,2\\}", "\\overline{AB}", "^{", "_{", "^", "_")
SYMBOLS = ("=", "<", ">", "≤", "≥", "≠", "≈", "×", "÷", "*", "/", "^", "·", "•", "√", "∞", "→", "->", "=>",
           "<=>", "⇔", "∴", "∈", "∀", "∃", "∨", "∧", "¬", "⊃", "≡", "|", "||", "&", "@", "#", "####", "<<", ">>",
           "~", "§", "′", "″", "(", ")", "[", "]", "( )", "___", "（ ）", "!", "?", ".", ",", ";", ":", "'", '"',
           "…", "...", "\\", "`", "ⅻ", "Ⅻ", "①", "②-⑤", "㉑", "½", "⅓", "¾", "⅛", "⁄", "²", "³", "¹", "⁻¹", "₂",
           "٣", "௰", "൰", "〇", "𝟙", "⑴", "⒈", "Õ", "Ò", "Ó", "α", "Ω", "ς", "☃", "\u200b", "\x00", "\t", "\n",
           "\ud800", "\u0301", "ʰ", "\ufeff")
SEPARATORS = ("", " ", " ", " ", "  ", "\n", ", ", ". ", "-", "/", ":", "(", ")")
DIGITS = "0123456789"


class Chooser(Protocol):
    """What a generator asks for; hypothesis and random.Random each answer it (see the module doc)."""

    def pick(self, options: Sequence[T]) -> T: ...

    def number(self, lo: int, hi: int) -> int: ...

    def chars(self, alphabet: str | None, lo: int, hi: int) -> str:
        """lo..hi characters of `alphabet`, or of any code point (surrogates and controls too) when None."""


class RandomChooser:
    def __init__(self, rng: random.Random):
        self.rng = rng

    def pick(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]

    def number(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def chars(self, alphabet: str | None, lo: int, hi: int) -> str:
        n = self.rng.randint(lo, hi)
        if alphabet is not None:
            return "".join(self.rng.choice(alphabet) for _ in range(n))
        # any code point, biased towards ASCII and the BMP where text mostly lives
        spans = ((0x20, 0x7E), (0, 0x2FFF), (0, 0xFFFF), (0, 0x10FFFF))
        return "".join(chr(self.rng.randint(*self.rng.choice(spans))) for _ in range(n))


class HypothesisChooser:
    def __init__(self, draw: Callable):
        self.draw = draw

    def pick(self, options: Sequence[T]) -> T:
        return self.draw(st.sampled_from(options))

    def number(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def chars(self, alphabet: str | None, lo: int, hi: int) -> str:
        alphabet = alphabet if alphabet is not None else st.characters(exclude_categories=())
        return self.draw(st.text(alphabet, min_size=lo, max_size=hi))


def numeral(c: Chooser) -> str:
    """A number as benchmarks write it, and as they mistype it: '1,234.5', '.5', '007', '1.', '1,23',
    '12:30', '-7', a 60-digit run, a 400-digit run (more than any number name covers)."""
    kind = c.number(0, 10)
    if kind == 0:
        return str(c.number(-10**6, 10**6))
    if kind == 1:
        return f"{c.number(0, 10**9):,}"
    if kind == 2:
        return f"{c.number(0, 9999)}.{c.number(0, 10**6)}"
    if kind == 3:
        return "." + c.chars(DIGITS, 1, 4)
    if kind == 4:
        return c.chars(DIGITS + ",.", 1, 8)
    if kind == 5:
        return c.chars(DIGITS, 20, 60) if c.number(0, 20) else c.chars(DIGITS + ",", 300, 320)
    if kind == 6:
        return f"{c.number(0, 30)}:{c.number(0, 99):02d}" + c.pick(("", ":00", " PM", "am", "-17:00"))
    if kind == 7:
        return c.pick(("1914-1918", "2007 to 2010", "1648", "the 1980s", "1,000,000", "0", "00", "1e5", "3.0e-8",
                       "0x1F", "1st", "22nd", "3rd", "11th", "100th", "2:3:5", "5pm", "in 1999", "1200 BC"))
    return str(c.number(0, 2100))


def fraction(c: Chooser) -> str:
    """'1/2', '-3/4', '3 1/2', '1(1/2)', '½', '\\frac{a}{b}', '0/0', '10/3', '1/2/3'."""
    a, b = c.number(0, 120), c.number(0, 120)
    return c.pick((f"{a}/{b}", f"-{a}/{b}", f"+{a}/{b}", f"{a} {b}/{a + b}", f"{a}({b}/{a + b})", f"{a}/{b}/{a}",
                   f"\\frac{{{a}}}{{{b}}}", f"-\\frac{{{a}}}{{{b}}}", f"{a}⁄{b}", f"{a} / {b}", f"({a}/{b})",
                   f"{a}½", f"-{a}¾", "½", "-½", "1/0", "0/0", f"{a}.{b}/{a}", f"{a}/{b}={a}", f"{a} - {b}/{a + 1}"))


def value(c: Chooser) -> str:
    return numeral(c) if c.number(0, 1) else fraction(c)


def quantity(c: Chooser) -> str:
    """A number (often signed, often a fraction) with a unit, glued or spaced, sometimes a rate."""
    sign = c.pick(("",) * 4 + SIGNS)
    rate = c.pick(("",) * 4 + tuple("/" + u for u in ("s", "h", "hr", "mol", "kg", "bush", "hour")))
    tail = c.pick(("", "", ".", " long", " of", " each", "-labelled", " + 2", " = 3", " the", " solution"))
    return f"{sign}{value(c)}{c.pick(('', ' ', '-', '  '))}{c.pick(UNITS)}{rate}{tail}"


def money(c: Chooser) -> str:
    """'$4.95', '-$0.5', '$-1/2', '€3 million', '5£', '$ 1,000.005', '$.99', '$17/$8.50'."""
    sign, symbol, amount, scale = c.pick(("", "", "-", "+", "- ", "±", "−")), c.pick(CURRENCIES), value(c), c.pick(SCALES)
    form = c.number(0, 3)
    if form == 0:
        return f"{sign}{symbol}{amount}{scale}"
    if form == 1:
        return f"{symbol}{sign}{amount}{scale}"
    if form == 2:
        return f"{sign}{amount}{symbol}"
    return f"{symbol}{amount}/{c.pick(CURRENCIES)}{numeral(c)}"


def word(c: Chooser) -> str:
    return c.pick(WORDS)


def sign_or_symbol(c: Chooser) -> str:
    return c.pick(SIGNS + SYMBOLS)


def unit_or_currency(c: Chooser) -> str:
    return c.pick(UNITS + CURRENCIES)


def latex_command(c: Chooser) -> str:
    return c.pick(LATEX)


def any_characters(c: Chooser) -> str:
    return c.chars(None, 0, 4)


def formula(c: Chooser) -> str:
    """A formula in one of LaTeX's delimiters, or bare; braces not always balanced."""
    parts = [c.pick((latex_command, value, word, sign_or_symbol))(c) for _ in range(c.number(1, 6))]
    left, right = c.pick((("$", "$"), ("$$", "$$"), ("\\(", "\\)"), ("\\[", "\\]"), ("", ""), ("$", ""),
                          ("{", "}"), ("$", "$$")))
    return left + c.pick(("", " ")).join(parts) + right


ATOMS = (word, word, word, numeral, fraction, quantity, quantity, money, formula, latex_command, sign_or_symbol,
         unit_or_currency, any_characters)


def repeated(c: Chooser) -> str:
    """One atom many times with one separator, as in a long list or a long sum ('3 apples + 4
    apples + ...'): where a pattern can match one text many ways, this is what takes exponential time."""
    one, separator = c.pick(ATOMS)(c), c.pick(SEPARATORS + (" + ", " = ", " x ", " - ", "; "))
    return separator.join([one] * c.number(2, 40))


def text(c: Chooser, max_atoms: int = 10) -> str:
    """Benchmark-like display text (a run of atoms joined by spaces and punctuation), or, one time
    in five, any characters at all, or, one time in ten, a repeated atom."""
    kind = c.number(0, 9)
    if kind < 2:
        return c.chars(None, 0, 30)
    if kind == 2:
        return repeated(c)
    return "".join(c.pick(ATOMS)(c) + c.pick(SEPARATORS) for _ in range(c.number(0, max_atoms)))


def answer_letter(c: Chooser, n_options: int) -> str:
    """Mostly one letter that names an option (or several, comma-joined, like HSSBench); sometimes
    one that does not (past the options, lower case, empty, not a letter)."""
    named = LETTERS[: min(n_options, len(LETTERS))]
    if named and c.number(0, 9) < 8:
        picks = list(dict.fromkeys(c.pick(named) for _ in range(c.pick((1, 1, 1, 2, 3)))))
        return ",".join(picks)
    return c.pick(("", "Z", "a", "?", "A,", ",", "AA", "A,A", "J", "Ä", "B,A"))


QUESTIONS = ("How many {w} does she have left?", "How much money, in dollars, did he spend on {w}?",
             "What percent of the {w} are left?", "How old is {w}?", "How many {w} of {w} in total (in {w})?",
             "Calculate the {w} of the {w}.", "What is the total number of {w}?", "{t}", "{t} ( )", "{t}: ___")


def question(c: Chooser) -> str:
    """Any text, or the question shapes the answer's unit is read from ('how many lego sets')."""
    return c.pick(QUESTIONS).format(w=word(c), t=text(c))


def worked_solution(c: Chooser) -> str:
    """A GSM8K-like solution: sentences with calculations, calculator notes and an answer mark, or any text."""
    if c.number(0, 2) == 0:
        return text(c, 30)
    steps = []
    for _ in range(c.number(1, 6)):
        calc = f"{value(c)} {c.pick(('+', '-', '*', 'x', '/', '×'))} {value(c)} = {c.pick(('', '$'))}{value(c)}"
        note = f"<<{calc.replace(' ', '')}>>" if c.number(0, 1) else ""
        steps.append(f"{c.pick(('She makes', 'So', 'That is', 'He spent', 'The total is'))} {calc}{note} "
                     f"{c.pick(('', word(c), 'dollars', 'minutes', 'because ' + value(c)))}{c.pick(('.', '. ', ':', ''))}")
    return " ".join(steps) + f"\n#### {numeral(c)}"


def answer(c: Chooser) -> str:
    """An open answer: a number as GSM8K writes it ('18', '-3', '1,000', '.5'), or any text."""
    return numeral(c) if c.number(0, 1) else text(c)


def source_item(c: Chooser) -> SourceItem:
    """A source item as any adapter could build it: 0 to 40 options of any text, an answer letter
    (usually naming an option), a worked solution, follow-ups."""
    options = [text(c) for _ in range(c.pick((0, c.number(1, 10), c.number(2, 40))))]
    letter = answer_letter(c, len(options)) if options else ""
    first = letter.split(",")[0]
    named = first in LETTERS and first and LETTERS.index(first) < len(options)
    said = options[LETTERS.index(first)] if named and c.number(0, 5) else answer(c)
    followups = [FollowUp(question(c), answer(c)) for _ in range(c.pick((0, 0, 1, 2)))]
    item_id = c.pick(("mmlu_pro-1", "gsm8k-7", "x", "mt_bench-81"))
    return SourceItem(id=item_id, source=item_id.split("-")[0], category="any", question=question(c),
                      options=options, answer=said, answer_letter=letter, explanation=worked_solution(c),
                      followups=followups, variants=c.number(0, 2))


texts = st.composite(lambda draw: text(HypothesisChooser(draw)))
source_items = st.composite(lambda draw: source_item(HypothesisChooser(draw)))

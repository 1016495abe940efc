"""Numbers in words: the num2words readings every other pass uses, and the two passes that read
numerals themselves.

`arithmetic` runs early (a sum like '24/2=12' must be read before '24/2' becomes a fraction);
`numerals` runs late, after money, dates and units have taken the numbers they own, and reads
whatever digits are left so none survive.
"""

from __future__ import annotations

import re

from num2words import CONVERTER_CLASSES, num2words
from text_to_num import alpha2digit

# a numeral as benchmarks write it: '1,234.5', '12', '.5'
NUM = r"\d+(?:,\d{3})*(?:\.\d+)?|\.\d+"
# A fraction is never part of a run of slashes ('1/2/3' is divisions).
FRACTION = r"(?<![\d/])\d+/\d+(?![\d/])"
# Any value a pass reads with `say_number`: a mixed number, a fraction or a numeral.
VALUE = rf"\d+\s+{FRACTION}|{FRACTION}|{NUM}"
# A number in a chain of operations ('24/2=12', '3 1/2 - 2 = 1 1/2'): a mixed number or a numeral.
# A fraction there is a numeral, '/' and a numeral, so a chain matches one way only; were a term a
# fraction too, a chain of n fractions that fails to match would be retried in 2^n ways (a hang).
OPERAND = rf"\d+\s+{FRACTION}|{NUM}"
# Number words as spoken text writes them (regular-expression alternatives, no groups to capture): the
# units, the tens, and any word of a number said in words ("twenty three", "one hundred", "half").
UNIT_WORDS = "one|two|three|four|five|six|seven|eight|nine"
TENS_WORDS = "(?:twen|thir|for|fif|six|seven|eigh|nine)ty"
NUMBER_WORD = (rf"(?:zero|{UNIT_WORDS}|ten|eleven|twelve|(?:thir|four|fif|six|seven|eigh|nine)teen|{TENS_WORDS}|"
               r"hundred|thousand|million|half)")
# The most digits a number name covers (num2words names numbers below 10**306). A longer run is a
# digit string (a serial, a hash, a long expansion), read digit by digit (prepare.py's `clean`).
NAMED_DIGITS = len(str(CONVERTER_CLASSES["en"].MAXVAL)) - 1
# A signed value as the passes capture it: '-1,234.5', '+.5', '3 1/2', '-3/4'.
_VALUE = re.compile(r"([-+]?)\s*(?:(\d+)\s+(\d+)/(\d+)|(\d+)/(\d+)|(\d*)(?:\.(\d*))?)")


def _words(text: str) -> str:
    """num2words output as plain space-separated words ('twenty-one' -> 'twenty one')."""
    return text.replace(",", "").replace("-", " ")


def cardinal(n: int) -> str:
    return _words(num2words(n))


def say_digits(digits: str) -> str:
    """'0042' -> 'zero zero four two': a digit string said one digit at a time."""
    return " ".join(cardinal(int(d)) for d in digits if d.isdigit())


def say_number(text: str) -> str:
    """'1,234.5' -> 'one thousand two hundred and thirty four point five'; '.5' -> 'zero point five';
    '-3/4' -> 'minus three quarters'; '2 1/2' -> 'two and a half'.

    Every shape of value a pass captures (a sign, a mixed number, a fraction, a decimal) is read
    here, so no pass hands a fraction to a reader of decimals. Anything else is a ValueError."""
    m = _VALUE.fullmatch(text.replace(",", "").strip())
    if not m or not any(m.group(g) for g in (2, 5, 7, 8)):
        raise ValueError(f"not a number: {text!r}")
    sign, whole, num, den, top, bottom, units, decimals = m.groups()
    if whole:
        out = say_mixed(cardinal(int(whole)), int(num), int(den))
    elif top:
        out = say_fraction(int(top), int(bottom))
    else:
        decimals = (decimals or "").rstrip("0")  # "5.20" is said "five point two"
        head = cardinal(int(units or 0))
        out = f"{head} point {say_digits(decimals)}" if decimals else head
    return f"minus {out}" if sign == "-" else out


def say_year(n: int) -> str:
    return _words(num2words(n, to="year")) if 1000 <= n <= 2099 else cardinal(n)


def plural_of(words: str) -> str:
    """A said number as a noun in the plural: 'four' -> 'fours', 'six' -> 'sixes', 'nineteen ninety' ->
    'nineteen nineties' (a decade, a board called a two by four, 'in his forties')."""
    if words.endswith("x"):
        return words + "es"
    return words[:-1] + "ies" if words.endswith("y") else words + "s"


def say_ordinal(n: int) -> str:
    return _words(num2words(n, to="ordinal"))


_FRACTION_NAMES = {2: ("half", "halves"), 4: ("quarter", "quarters")}


def say_fraction(num: int, den: int) -> str:
    """3/8 -> 'three eighths'; 1/2 -> 'one half'; 24/2 -> 'twenty four divided by two'.

    The one reading of a fraction, wherever it stands (in a sum or in a sentence): a proper
    fraction with a common denominator is named, another proper one is 'sixty over one hundred',
    anything else is a division."""
    if den <= 1 or num >= den or not (den <= 20 or den in (32, 64) or num == 1 or (den == 100 and num < 10)):
        return f"{cardinal(num)} {'divided by' if num >= den and den else 'over'} {cardinal(den)}"
    if den in _FRACTION_NAMES:
        return f"{cardinal(num)} {_FRACTION_NAMES[den][0 if num == 1 else 1]}"
    ordinal = re.sub(r"^one ", "", say_ordinal(den))  # 1/100: "one hundredth", not "one one hundredth"
    return f"{cardinal(num)} {ordinal}{'' if num == 1 else 's'}"


def say_mixed(whole: str, num: int, den: int) -> str:
    """'3 1/2' -> 'three and a half'; '1 3/4' -> 'one and three quarters'."""
    if num >= den or den > 100:
        return f"{whole} and {say_fraction(num, den)}"
    part = say_fraction(num, den)
    return f"{whole} and {'a ' + part.split(' ', 1)[1] if num == 1 else part}"


# a mixed number ('3 1/2', 'three 1/4') and a fraction written with a slash
MIXED = r"(\d+|one|two|three|four|five|six|seven|eight|nine|ten)\s+(\d+)/(\d+)(?![\d/])"
_FRACTION = re.compile(r"(?<![\w.])(\d+)/(\d+)(?![\d.,]\d|/)")


def arithmetic(text: str) -> str:
    """Chains that end in '=' ('16-3-4=9', '24/2=12', '9 * 2 = 18', '3 1/2 - 2 = 1 1/2') are sums:
    read their operators. A proper fraction or a mixed number inside is a number, not a division."""
    ops = {"+": " plus ", "-": " minus ", "*": " times ", "x": " times ", "×": " times ", "/": " divided by ",
           "÷": " divided by "}
    term = rf"\(?\$?(?:{OPERAND})%?\)?"  # its brackets are its own: none around it in the chain (one way to match)

    def chain(m: re.Match) -> str:
        out, pos = [], 0
        for t in re.finditer(r"\d+\s+\d+/\d+(?![\d/])|(\d+)/(\d+)(?![\d/])", m.group(0)):
            if t.group(1) and int(t.group(1)) >= int(t.group(2)):
                continue  # '24/2': a division
            out.append(_operators(m.group(0)[pos:t.start()], ops) + t.group(0))
            pos = t.end()
        return "".join(out) + _operators(m.group(0)[pos:], ops)

    text = re.sub(rf"(?<![\w.]){term}(?:\s*[-+*x×/÷]\s*{term})+(?=\s*\)?\s*=)", chain, text)
    # '22 - 7m': a spaced minus between numbers, read before the units pass takes '7m' (year ranges stay)
    return re.sub(r"(?<![\d,.])(\d+)\s+-\s+(?=(\d+)(?!\d))", lambda m: m.group(0) if
                  all(re.fullmatch(r"1\d{3}|20\d\d", g) for g in m.groups()) else f"{m.group(1)} minus ", text)


def _operators(text: str, ops: dict[str, str]) -> str:
    return re.sub(r"\s*([-+*x×/÷])\s*", lambda o: ops[o.group(1)], text)


def numerals(text: str) -> str:
    """Every digit left, as words. A minus sign is read first, whatever the shape of the number after
    it ('-3/4', '-5%', '(-1 1/2)'): between two numbers it is a subtraction, before one its sign."""
    text = re.sub(r"(?<=\d)\s+-\s+(?=\$?\d)", " minus ", text)
    text = re.sub(r"(?<![\w.)])-\s?(?=\.?\d)", " minus ", text)
    text = re.sub(rf"(?<![\w.])({VALUE})\s?%", lambda m: f" {say_number(m.group(1))} percent ", text)
    text = re.sub(r"\b(\d+)\s*(st|nd|rd|th)\b", lambda m: f" {say_ordinal(int(m.group(1)))} ", text)
    text = re.sub(rf"(?<![\w.]){MIXED}",
                  lambda m: f" {say_mixed(cardinal(int(m.group(1))) if m.group(1).isdigit() else m.group(1), int(m.group(2)), int(m.group(3)))} ", text)
    text = re.sub(r"(?<![\w.])(\d+)\s*/\s*(\d+)\b(?![.,]\d)",
                  lambda m: f" {say_fraction(int(m.group(1)), int(m.group(2)))} ", text)
    text = re.sub(r"(?<=\d)\s*[x×]\s*(?=\d)", " times ", text)
    text = re.sub(r"(?<![\w.-])(\d+)-(\d+)(?![\w-]|\.\d)", lambda m: f"{m.group(1)} to {m.group(2)}", text)
    text = re.sub(rf"(?<![\d])({NUM})", lambda m: f" {say_number(m.group(0))} ", text)
    return re.sub(r"\d+", lambda m: f" {cardinal(int(m.group(0)))} ", text)  # anything left: digits one by one


def numbers_said(spoken: str) -> list[float]:
    """The numbers a spoken text says, in order ('minus five' -> -5.0), read back with text2num."""
    digits = alpha2digit(spoken, "en", threshold=0)
    return [float(m.group(2)) * (-1 if m.group(1) else 1)
            for m in re.finditer(r"(minus\s+)?(\d+(?:\.\d+)?)", digits)]

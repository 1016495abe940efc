"""Numbers in words: the num2words readings every other pass uses, and the two passes that read
numerals themselves.

`arithmetic` runs early (a sum like '24/2=12' must be read before '24/2' becomes a fraction);
`numerals` runs late, after money, dates and units have taken the numbers they own, and reads
whatever digits are left so none survive.
"""

from __future__ import annotations

import re

from num2words import num2words

# a numeral as benchmarks write it: '1,234.5', '12', '.5'
NUM = r"\d+(?:,\d{3})*(?:\.\d+)?|\.\d+"


def _words(text: str) -> str:
    """num2words output as plain space-separated words ('twenty-one' -> 'twenty one')."""
    return text.replace(",", "").replace("-", " ")


def cardinal(n: int) -> str:
    return _words(num2words(n))


def say_number(text: str) -> str:
    """'1,234.5' -> 'one thousand two hundred and thirty four point five'; '.5' -> 'point five'."""
    text = text.replace(",", "")
    negative = text.startswith("-")
    text = text.lstrip("-+")
    if "." in text:
        whole, frac = text.split(".", 1)
        frac = frac.rstrip("0")  # "5.20" is said "five point two"
        head = cardinal(int(whole or 0))
        out = f"{head} point {' '.join(cardinal(int(d)) for d in frac if d.isdigit())}" if frac else head
    else:
        out = cardinal(int(text))
    return f"minus {out}" if negative else out


def say_year(n: int) -> str:
    return _words(num2words(n, to="year")) if 1000 <= n <= 2099 else cardinal(n)


def say_ordinal(n: int) -> str:
    return _words(num2words(n, to="ordinal"))


_FRACTION_NAMES = {2: ("half", "halves"), 4: ("quarter", "quarters")}


def say_fraction(num: int, den: int) -> str:
    """3/8 -> 'three eighths'; 1/2 -> 'one half'; 24/2 -> 'twenty four divided by two'."""
    if den == 0 or num >= den or den > 100:
        return f"{cardinal(num)} {'divided by' if num >= den and den else 'over'} {cardinal(den)}"
    if den in _FRACTION_NAMES:
        return f"{cardinal(num)} {_FRACTION_NAMES[den][0 if num == 1 else 1]}"
    ordinal = re.sub(r"^one ", "", say_ordinal(den))  # 1/100: "one hundredth", not "one one hundredth"
    return f"{cardinal(num)} {ordinal}{'' if num == 1 else 's'}"


def arithmetic(text: str) -> str:
    """Chains that end in '=' ('16-3-4=9', '24/2=12', '9 * 2 = 18') are sums: read their operators."""
    ops = {"+": " plus ", "-": " minus ", "*": " times ", "x": " times ", "×": " times ", "/": " divided by ",
           "÷": " divided by "}

    def chain(m: re.Match) -> str:
        return re.sub(r"\s*([-+*x×/÷])\s*", lambda o: ops[o.group(1)], m.group(0))

    return re.sub(rf"(?<![\w.])\$?(?:{NUM})%?(?:\s*[-+*x×/÷]\s*\(?\$?(?:{NUM})%?\)?)+(?=\s*=)", chain, text)


def numerals(text: str) -> str:
    text = re.sub(rf"(?<![\w.])({NUM})\s?%", lambda m: f" {say_number(m.group(1))} percent ", text)
    text = re.sub(r"\b(\d+)\s*(st|nd|rd|th)\b", lambda m: f" {say_ordinal(int(m.group(1)))} ", text)
    text = re.sub(r"(?<![\w.])(\d+)\s+(\d+)/(\d+)\b(?!\s*[/\d])",
                  lambda m: f" {cardinal(int(m.group(1)))} and {say_fraction(int(m.group(2)), int(m.group(3)))} ", text)
    text = re.sub(r"(?<![\w.])(\d+)\s*/\s*(\d+)\b(?![.,]\d)",
                  lambda m: f" {say_fraction(int(m.group(1)), int(m.group(2)))} ", text)
    text = re.sub(r"(?<=\d)\s+-\s+(?=\$?\d)", " minus ", text)
    text = re.sub(r"(?<=\d)\s*[x×]\s*(?=\d)", " times ", text)
    text = re.sub(r"(?<![\w.-])(\d+)-(\d+)(?![\w.-])", lambda m: f"{m.group(1)} to {m.group(2)}", text)
    text = re.sub(rf"(?<![\w.)])-\s?({NUM})", lambda m: f" minus {say_number(m.group(1))} ", text)
    text = re.sub(rf"(?<![\d])({NUM})", lambda m: f" {say_number(m.group(0))} ", text)
    return re.sub(r"\d+", lambda m: f" {cardinal(int(m.group(0)))} ", text)  # anything left: digits one by one

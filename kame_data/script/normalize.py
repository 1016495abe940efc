"""Display text -> spoken text: what a TTS voice should read, with no digits or symbols left.

Numbers go through num2words; currency, percentages, ordinals, fractions, decimals, simple
LaTeX, units, math symbols and common abbreviations are written out in words.
"""

from __future__ import annotations

import re
import unicodedata

from num2words import num2words

_ABBREVIATIONS = {
    "e.g.": "for example", "i.e.": "that is", "etc.": "et cetera", "vs.": "versus", "approx.": "approximately",
    "Dr.": "Doctor", "Mr.": "Mister", "Mrs.": "Missus", "Ms.": "Miz", "St.": "Saint", "No.": "number",
    "U.S.": "U S", "U.K.": "U K", "a.m.": "A M", "p.m.": "P M",
}
_UNITS = {
    "km": "kilometers", "m": "meters", "cm": "centimeters", "mm": "millimeters", "kg": "kilograms", "g": "grams",
    "mg": "milligrams", "lb": "pounds", "lbs": "pounds", "oz": "ounces", "ft": "feet", "in": "inches",
    "mi": "miles", "mph": "miles per hour", "km/h": "kilometers per hour", "h": "hours", "hr": "hours",
    "hrs": "hours", "min": "minutes", "s": "seconds", "sec": "seconds", "ml": "milliliters", "l": "liters",
    "L": "liters", "kW": "kilowatts", "W": "watts", "V": "volts", "J": "joules", "N": "newtons", "Hz": "hertz",
    "K": "kelvin", "mol": "moles", "atm": "atmospheres", "Pa": "pascals", "kPa": "kilopascals", "nm": "nanometers",
}
_SYMBOLS = {
    "+": " plus ", "=": " equals ", "×": " times ", "÷": " divided by ", "±": " plus or minus ",
    "≤": " less than or equal to ", "≥": " greater than or equal to ", "≠": " is not equal to ",
    "<": " less than ", ">": " greater than ", "&": " and ", "@": " at ", "°C": " degrees Celsius ",
    "°F": " degrees Fahrenheit ", "°": " degrees ", "√": " the square root of ", "π": " pi ", "∞": " infinity ",
    "→": " to ", "%": " percent ", "#": " number ", "*": " times ", "^": " to the power of ", "~": " about ",
    "€": " euros ", "£": " pounds ", "¢": " cents ",
}
_LATEX_WORDS = {
    r"\times": " times ", r"\cdot": " times ", r"\div": " divided by ", r"\pm": " plus or minus ",
    r"\leq": " less than or equal to ", r"\le": " less than or equal to ", r"\geq": " greater than or equal to ",
    r"\ge": " greater than or equal to ", r"\neq": " is not equal to ", r"\approx": " approximately ",
    r"\infty": " infinity ", r"\pi": " pi ", r"\alpha": " alpha ", r"\beta": " beta ", r"\theta": " theta ",
    r"\lambda": " lambda ", r"\mu": " mu ", r"\sigma": " sigma ", r"\Delta": " delta ", r"\rightarrow": " to ",
    r"\to": " to ", r"\in": " in ", r"\sqrt": " the square root of ", r"\%": " percent ", r"\$": " dollars ",
    r"\left": "", r"\right": "", r"\,": " ", r"\;": " ", r"\!": "",
}
_FRACTION_NAMES = {2: ("half", "halves"), 4: ("quarter", "quarters")}

_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"


def _number(text: str) -> str:
    """'1,234.5' -> 'one thousand two hundred thirty four point five'."""
    text = text.replace(",", "")
    if "." in text:
        whole, frac = text.split(".", 1)
        head = num2words(int(whole or 0))
        return f"{head} point {' '.join(num2words(int(d)) for d in frac)}"
    return num2words(int(text))


def _money(m: re.Match) -> str:
    amount = m.group(1).replace(",", "")
    scale = m.group(2) or ""
    if "." in amount and not scale:
        dollars, cents = amount.split(".", 1)
        cents = int((cents + "0")[:2])
        d = int(dollars or 0)
        parts = []
        if d or not cents:
            parts.append(f"{num2words(d)} dollar{'s' if d != 1 else ''}")
        if cents:
            parts.append(f"{num2words(cents)} cent{'s' if cents != 1 else ''}")
        return " and ".join(parts)
    words = _number(amount)
    return f"{words} {scale} dollars".replace("  ", " ") if scale else f"{words} dollar{'s' if amount not in ('1',) else ''}"


def _fraction(num: int, den: int) -> str:
    if den == 0:
        return f"{num2words(num)} over zero"
    if den in _FRACTION_NAMES:
        name = _FRACTION_NAMES[den][0 if num == 1 else 1]
        return f"{'one' if num == 1 else num2words(num)} {name}"
    if den <= 20 or den in (30, 40, 50, 60, 70, 80, 90, 100, 1000):
        ordinal = num2words(den, to="ordinal")
        return f"{num2words(num)} {ordinal}{'' if num == 1 else 's'}"
    return f"{num2words(num)} over {num2words(den)}"


def _latex(text: str) -> str:
    text = re.sub(r"\\d?frac\{([^{}]*)\}\{([^{}]*)\}", lambda m: f" {m.group(1)} over {m.group(2)} ", text)
    text = re.sub(r"\\sqrt\{([^{}]*)\}", r" the square root of \1 ", text)
    text = re.sub(r"\\(?:text|mathrm|mathbf|mathit|operatorname)\{([^{}]*)\}", r" \1 ", text)
    text = re.sub(r"\^\{?2\}?(?![0-9])", " squared ", text)
    text = re.sub(r"\^\{?3\}?(?![0-9])", " cubed ", text)
    text = re.sub(r"\^\{([^{}]*)\}", r" to the power of \1 ", text)
    text = re.sub(r"_\{([^{}]*)\}", r" sub \1 ", text)
    for k in sorted(_LATEX_WORDS, key=len, reverse=True):
        text = text.replace(k, _LATEX_WORDS[k])
    text = re.sub(r"\\[A-Za-z]+", " ", text)  # unknown commands: drop the command, keep arguments
    return text.replace("$", " ").replace("{", " ").replace("}", " ")


def to_spoken(text: str) -> str:
    """The spoken form of display text. The result has no digits and no math or markup symbols."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)  # control characters
    text = re.sub(r"<<[^<>]*>>", " ", text)  # GSM8K calculator notes
    text = re.sub(r"####\s*", " The answer is ", text)
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    text = text.replace("–", " to ").replace("—", ", ")
    for k, v in _ABBREVIATIONS.items():
        text = re.sub(rf"(?<![A-Za-z]){re.escape(k)}", v, text)
    # money before LaTeX, since `$` is both a currency sign and a math delimiter
    text = re.sub(rf"\$\s?({_NUM})(?:\s?(million|billion|thousand|trillion))?\b(?!\s*\$)", lambda m: " " + _money(m) + " ", text)
    if "\\" in text or "$" in text or "^" in text:
        text = _latex(text)
    text = re.sub(r"(?<=\d)\s*-\s*(?=\d)", " minus ", text)
    text = re.sub(rf"(?<![\d.])({_NUM})\s?%", lambda m: f" {_number(m.group(1))} percent ", text)
    text = re.sub(r"\b(\d+)(st|nd|rd|th)\b", lambda m: f" {num2words(int(m.group(1)), to='ordinal')} ", text)
    text = re.sub(r"\b(\d+)\s*/\s*(\d+)\b", lambda m: f" {_fraction(int(m.group(1)), int(m.group(2)))} ", text)
    text = re.sub(r"\b(in|since|by|from|of|year|until|during|around)\s+(1[1-9]\d\d|20\d\d)\b",
                  lambda m: f"{m.group(1)} {num2words(int(m.group(2)), to='year')}", text)
    unit_alt = "|".join(sorted((re.escape(u) for u in _UNITS), key=len, reverse=True))
    text = re.sub(rf"({_NUM})\s?({unit_alt})\b(?!')", lambda m: f" {_number(m.group(1))} {_UNITS[m.group(2)]} ", text)
    text = re.sub(rf"(?<![\w.])-({_NUM})", lambda m: f" minus {_number(m.group(1))} ", text)
    text = re.sub(rf"(?<![\d]){_NUM}", lambda m: f" {_number(m.group(0))} ", text)
    for k in sorted(_SYMBOLS, key=len, reverse=True):
        text = text.replace(k, _SYMBOLS[k])
    text = re.sub(r"(?<=\w)/(?=\w)", " per ", text)
    text = re.sub(r"(?<=[A-Za-z])-(?=[A-Za-z])", " ", text)  # twenty-four -> twenty four (one word per TTS word)
    text = re.sub(r"[\"()\[\]{}|\\/_`*<>]", " ", text)
    text = re.sub(r"\s+([,.;:?!])", r"\1", text)
    text = re.sub(r"([,.;:?!])(?=[A-Za-z])", r"\1 ", text)
    text = re.sub(r"([,;:])[,;:]+", r"\1", text)
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"^[,.;:]\s*", "", text)
    text = re.sub(r"(?<=\s)[-](?=\s)", " ", text)
    return re.sub(r"\s+", " ", text).strip()


_WORD_EDGE = re.compile(r"^[^\w']+|[^\w']+$")


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

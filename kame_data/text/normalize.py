"""Display text -> spoken text: what a TTS voice should read, with no digits or symbols left.

Benchmark text is written to be read, not heard: `$4.95`, `24/2=12`, `$\\frac{1}{2}$`, `25°C`,
`CO2`, `(∃x)`. `to_spoken` rewrites it the way a person would say it (numbers through
num2words), in a fixed order of passes: each pass handles one kind of notation and leaves plain
words for the next. Whatever symbol survives every pass is dropped, so the result never carries
a digit, `$`, `\\`, `<<` or `####` (see `UNSPEAKABLE`).
"""

from __future__ import annotations

import re
import unicodedata

from num2words import num2words

UNSPEAKABLE = re.compile(r"[0-9$\\]|<<|####")

# ---------------------------------------------------------------- numbers


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


# ---------------------------------------------------------------- tables

_ABBREVIATIONS = {
    "e.g.": "for example", "i.e.": "that is", "etc.": "et cetera", "vs.": "versus", "approx.": "approximately",
    "Dr.": "Doctor", "Mr.": "Mister", "Mrs.": "Missus", "Ms.": "Miz", "No.": "number", "Fig.": "figure",
    "U.S.": "U S", "U.K.": "U K", "U.N.": "U N", "a.m.": "A M", "p.m.": "P M", "cf.": "compare", "et al.": "and others",
}
# unit -> (singular, plural)
_UNITS: dict[str, tuple[str, str]] = {
    "km": ("kilometer", "kilometers"), "m": ("meter", "meters"), "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"), "μm": ("micrometer", "micrometers"), "nm": ("nanometer", "nanometers"),
    "kg": ("kilogram", "kilograms"), "g": ("gram", "grams"), "mg": ("milligram", "milligrams"),
    "μg": ("microgram", "micrograms"), "lb": ("pound", "pounds"), "lbs": ("pounds", "pounds"),
    "oz": ("ounce", "ounces"), "ft": ("foot", "feet"), "in": ("inch", "inches"), "mi": ("mile", "miles"),
    "yd": ("yard", "yards"), "mph": ("mile per hour", "miles per hour"), "km/h": ("kilometer per hour", "kilometers per hour"),
    "m/s": ("meter per second", "meters per second"), "h": ("hour", "hours"), "hr": ("hour", "hours"),
    "hrs": ("hours", "hours"), "min": ("minute", "minutes"), "s": ("second", "seconds"), "sec": ("second", "seconds"),
    "ms": ("millisecond", "milliseconds"), "μs": ("microsecond", "microseconds"), "ns": ("nanosecond", "nanoseconds"),
    "ml": ("milliliter", "milliliters"), "mL": ("milliliter", "milliliters"), "l": ("liter", "liters"),
    "L": ("liter", "liters"), "μL": ("microliter", "microliters"), "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"), "MW": ("megawatt", "megawatts"), "W": ("watt", "watts"),
    "V": ("volt", "volts"), "kV": ("kilovolt", "kilovolts"), "mV": ("millivolt", "millivolts"),
    "mA": ("milliampere", "milliamperes"), "J": ("joule", "joules"), "kJ": ("kilojoule", "kilojoules"),
    "cal": ("calorie", "calories"), "kcal": ("kilocalorie", "kilocalories"), "eV": ("electron volt", "electron volts"),
    "N": ("newton", "newtons"), "kN": ("kilonewton", "kilonewtons"), "Hz": ("hertz", "hertz"),
    "kHz": ("kilohertz", "kilohertz"), "MHz": ("megahertz", "megahertz"), "GHz": ("gigahertz", "gigahertz"),
    "K": ("kelvin", "kelvin"), "mol": ("mole", "moles"), "mole": ("mole", "moles"), "mmol": ("millimole", "millimoles"),
    "atm": ("atmosphere", "atmospheres"), "Pa": ("pascal", "pascals"), "kPa": ("kilopascal", "kilopascals"),
    "hPa": ("hectopascal", "hectopascals"), "mmHg": ("millimeter of mercury", "millimeters of mercury"),
    "Ω": ("ohm", "ohms"), "kΩ": ("kilohm", "kilohms"), "F": ("farad", "farads"), "μF": ("microfarad", "microfarads"),
    "C": ("coulomb", "coulombs"), "μC": ("microcoulomb", "microcoulombs"), "T": ("tesla", "tesla"),
    "KB": ("kilobyte", "kilobytes"), "MB": ("megabyte", "megabytes"), "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"), "°C": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"), "°K": ("kelvin", "kelvin"), "°": ("degree", "degrees"),
    "M": ("molar", "molar"), "dB": ("decibel", "decibels"),
}
# Units that are also ordinary words or letters: only taken right after a number and when no
# letter follows ("5 in." yes, "5 in the box" no; "2 m long" yes).
_AMBIGUOUS_UNITS = {"in", "s", "h", "m", "l", "L", "g", "K", "N", "J", "V", "W", "C", "F", "T", "M", "min", "mi"}
_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
               "£": ("pound", "pounds", "penny", "pence"), "¥": ("yen", "yen", "", "")}
_SYMBOLS = {
    "+": " plus ", "=": " equals ", "×": " times ", "÷": " divided by ", "±": " plus or minus ",
    "≤": " less than or equal to ", "≥": " greater than or equal to ", "≠": " is not equal to ",
    "≈": " approximately ", "∝": " is proportional to ", "<": " less than ", ">": " greater than ",
    "&": " and ", "@": " at ", "√": " the square root of ", "∞": " infinity ", "→": " to ", "⟶": " to ",
    "←": " gets ", "⇒": " implies ", "⇔": " if and only if ", "↔": " if and only if ", "%": " percent ",
    "#": " number ", "*": " times ", "^": " to the power of ", "~": " about ", "∈": " in ", "∉": " not in ",
    "∨": " or ", "∧": " and ", "¬": " not ", "⊃": " implies ", "≡": " is equivalent to ", "∀": " for all ",
    "∃": " there is ", "∥": " concatenated with ", "∑": " the sum of ", "∫": " the integral of ", "∂": " partial ",
    "∇": " del ", "′": " prime ", "″": " double prime ", "·": " times ", "§": " section ", "¢": " cents ",
    "€": " euros ", "£": " pounds ", "¥": " yen ", "°": " degrees ",
}
_LATEX_WORDS = {
    r"\times": " times ", r"\cdot": " times ", r"\div": " divided by ", r"\pm": " plus or minus ",
    r"\mp": " minus or plus ", r"\leq": " less than or equal to ", r"\le": " less than or equal to ",
    r"\geq": " greater than or equal to ", r"\ge": " greater than or equal to ", r"\neq": " is not equal to ",
    r"\ne": " is not equal to ", r"\approx": " approximately ", r"\sim": " about ", r"\propto": " is proportional to ",
    r"\infty": " infinity ", r"\rightarrow": " to ", r"\to": " to ", r"\leftarrow": " gets ", r"\Rightarrow": " implies ",
    r"\rightleftarrows": " is in equilibrium with ", r"\rightleftharpoons": " is in equilibrium with ",
    r"\leftrightarrow": " if and only if ", r"\in": " in ", r"\notin": " not in ", r"\%": " percent ", r"\$": " dollars ", r"\&": " and ", r"\log": " log ",
    r"\ln": " natural log of ", r"\sin": " sine ", r"\cos": " cosine ", r"\tan": " tangent ", r"\exp": " exp ",
    r"\max": " max ", r"\min": " min ", r"\gcd": " gcd ", r"\deg": " degree ", r"\circ": " degrees ",
    r"\prime": " prime ", r"\ell": " l ", r"\hbar": " h bar ", r"\angle": " angle ", r"\triangle": " triangle ",
r"\|": " ∥ ", r"\{": " ", r"\}": " ",
    r"\left": "", r"\right": "", r"\,": " ", r"\;": " ", r"\:": " ", r"\!": "", r"\quad": " ", r"\qquad": " ",
    r"\ ": " ", r"\\": " ",
}
_GREEK = {chr(c): unicodedata.name(chr(c)).split()[-1].lower() for c in range(0x391, 0x3CA)
          if unicodedata.name(chr(c), "").startswith("GREEK") and "FINAL" not in unicodedata.name(chr(c), "")}
_LATEX_GREEK = {f"\\{name}": f" {name} " for name in sorted(set(_GREEK.values()))}
_LATEX_GREEK.update({f"\\{name.capitalize()}": f" {name} " for name in sorted(set(_GREEK.values()))})
_LATEX_GREEK.update({r"\varepsilon": " epsilon ", r"\vartheta": " theta ", r"\varphi": " phi ", r"\varrho": " rho "})
_CIRCLED = {chr(0x2460 + i): i + 1 for i in range(20)}
_CIRCLED.update({chr(0x3251 + i): i + 21 for i in range(15)})
_MONTHS = ("January February March April May June July August September October November December "
           "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec").split()

_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?|\.\d+"
_INT = r"\d+(?:,\d{3})*"


# ---------------------------------------------------------------- passes

def _clean(text: str) -> str:
    """Characters first: vulgar fractions, superscripts, circled numbers, mojibake quotes, dashes."""
    for ch, digits in (("½", "1/2"), ("⅓", "1/3"), ("⅔", "2/3"), ("¼", "1/4"), ("¾", "3/4"), ("⅛", "1/8")):
        text = re.sub(rf"(\d)\s*{ch}", rf"\1 {digits}", text).replace(ch, f" {digits} ")
    text = text.replace("²", "^2").replace("³", "^3").replace("¹", "^1").replace("⁻¹", "^-1")
    text = re.sub("[" + "".join(_CIRCLED) + r"]+(?:\s*[-—–]\s*[" + "".join(_CIRCLED) + "]+)?",
                  lambda m: ", " + _circled(m.group(0)) + ", ", text)
    # Quotes and apostrophes decoded as MacRoman in some MMLU-Pro rows ("nurseÕs", "ÒI was fired ...Ó").
    text = re.sub(r"(?<=[A-Za-z])Õ(?=[a-z])", "'", text)
    text = re.sub(r"Ò(?=\S)|(?<=\S)Ó", '"', text)
    text = unicodedata.normalize("NFKC", text)
    if not text.isprintable():
        text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"').replace("…", "...")
    text = text.replace("−", "-").replace("‐", "-").replace("‑", "-").replace("\u2044", "/")
    text = re.sub(r"(?<=\d)\s*[–—]\s*(?=\d)", " to ", text)
    return text.replace("–", ", ").replace("—", ", ")


def _circled(marks: str) -> str:
    nums = [cardinal(_CIRCLED[ch]) for ch in marks if ch in _CIRCLED]
    if any(ch in "-—–" for ch in marks):
        return " to ".join(nums)
    return nums[0] if len(nums) == 1 else ", ".join(nums[:-1]) + " and " + nums[-1]


def _signs(text: str) -> str:
    """'\\$5' is a price; '- 10°C' after a word, or at the start, is a negative number; 'N_2O_4'
    is a formula (read 'N two O four'); '30!' is a factorial."""
    text = re.sub(r"(?<![\\{a-z])([A-Z][a-z]?)_(\d+)(?![\d}])", r"\1\2", text)
    text = text.replace("->", " → ").replace("=>", " ⇒ ").replace("<=>", " ⇔ ")
    text = re.sub(r"\b(\d+)!(?=\s+[a-z]|\s*[,;)]|\s*$)", r"\1 factorial", text)
    text = re.sub(r"(?<![\w(])(\d{1,2})\)\s+(?=[A-Za-z])", r", \1, ", text)  # "1) Guyana 2) Ecuador": a list
    text = re.sub(r"(?<=[A-Za-z0-9])•", " dot ", text)  # a radical: "CH3•"
    text = re.sub(r"\bet al\.'s", "and colleagues'", text)
    text = re.sub(r"\bsq\.?\s?ft\b\.?", "square feet", text)
    text = re.sub(r"\\\$\s?(?=\d)", "$", text)
    text = re.sub(r"\b(at|to|of|is|be|from|and|or|by|was|were|are|about|equals?|between)\s+-\s+(?=\d)", r"\1 -", text)
    return re.sub(r"^\s*-\s+(?=\d)", "-", text)


def _gsm8k(text: str) -> str:
    text = re.sub(r"<<[^<>]*>>", " ", text)  # calculator notes
    return re.sub(r"####\s*", " The answer is ", text)


_ABBREVIATION_RE = re.compile(r"(?<![A-Za-z])(?:" + "|".join(re.escape(k) for k in sorted(_ABBREVIATIONS, key=len, reverse=True)) + ")")


def _abbreviations(text: str) -> str:
    return _ABBREVIATION_RE.sub(lambda m: _ABBREVIATIONS[m.group(0)], text)


def _is_math(inner: str) -> bool:
    """Is `$inner$` a formula (rather than the text between two prices)?"""
    inner = inner.strip()
    if not inner:
        return False
    if re.search(r"[\\^_{}=!]", inner):
        return True
    return bool(re.fullmatch(r"[A-Za-z](?:\s*[-+*/]\s*[A-Za-z0-9]+)*|[A-Za-z]\(\w\)|\d+\s*[A-Za-z]", inner))


def _latex(text: str) -> str:
    """Simple LaTeX to words: fractions, roots, powers, subscripts, Greek, common operators."""
    # chemical formulas: \mathrm{H}_2 \mathrm{O} -> H2 O (read "H two O", not "H sub two")
    text = re.sub(r"\\mathrm\s*\{\s*~?([A-Z][A-Za-z]*)\s*\}\s*_\s*\{?\s*(\d+)\s*\}?", r"\1\2", text)
    text = re.sub(r"\\(?:mathrm|text|textrm|textbf|textit|mathbf|mathit|mathscr|operatorname|mbox)\s*\{\s*~?([^{}]*)\}",
                  r" \1 ", text)
    text = text.replace("~", " ")
    text = re.sub(r"\\n?f?actorial\s*\{([^{}]*)\}", r" \1 factorial ", text)  # also MMLU-Pro's "\nactorial" typo
    text = re.sub(r"(?<=[A-Za-z0-9}])\s*!", " factorial ", text)
    text = re.sub(r"\b([A-Z][a-z]?(?:[A-Z][a-z]?)+)\s*_\s*\{?\s*(\d+)\s*\}?", r"\1\2", text)  # CO_2 -> CO2
    for _ in range(3):  # nested fractions, innermost first
        text = re.sub(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", lambda m: f" {_over(m.group(1), m.group(2))} ", text)
        text = re.sub(r"\\[dt]?frac\s*(\d)(\d)", lambda m: f" {_over(m.group(1), m.group(2))} ", text)
    text = re.sub(r"\\sqrt\s*\[(\d)\]\s*\{([^{}]*)\}", lambda m: f" the {say_ordinal(int(m.group(1)))} root of {m.group(2)} ", text)
    text = re.sub(r"\\sqrt\s*\{([^{}]*)\}", r" the square root of \1 ", text)
    text = re.sub(r"\\(hat|bar|vec|tilde|dot)\s*\{([^{}]*)\}",
                  lambda m: f" {m.group(2)} {'vector' if m.group(1) == 'vec' else m.group(1)} ", text)
    text = re.sub(r"\^\s*\{?\s*\\circ\s*\}?\s*(?:\\mathrm\s*\{\s*~?([CFK])\s*\}|([CFK])\b)?",
                  lambda m: "°" + (m.group(1) or m.group(2) or ""), text)
    text = _powers(text)
    text = re.sub(r"_\s*\{([^{}]*)\}", r" sub \1 ", text)
    text = re.sub(r"_\s*([A-Za-z0-9])", r" sub \1 ", text)
    for table in (_LATEX_GREEK, _LATEX_WORDS):
        for k in sorted(table, key=len, reverse=True):
            text = re.sub(re.escape(k) + (r"(?![A-Za-z])" if k[-1].isalpha() else ""), table[k], text)
    text = re.sub(r"\\[A-Za-z]+", " ", text)  # unknown commands: drop the command, keep its arguments
    return text.replace("$", " ").replace("{", " ").replace("}", " ")


def _over(num: str, den: str) -> str:
    num, den = num.strip(), den.strip()
    if re.fullmatch(r"\d+", num) and re.fullmatch(r"\d+", den):
        return f"{num}/{den}"  # read later as a fraction
    return f"{num} over {den}"


def _powers(text: str) -> str:
    text = re.sub(r"\^\s*\{?\s*2\s*\}?(?![\d.])", " squared ", text)
    text = re.sub(r"\^\s*\{?\s*3\s*\}?(?![\d.])", " cubed ", text)
    text = re.sub(r"\^\s*\{\s*-\s*([^{}]+)\}", r" to the minus \1 ", text)
    text = re.sub(r"\^\s*-\s*(\d+|[A-Za-z])", r" to the minus \1 ", text)
    text = re.sub(r"\^\s*\{([^{}]*)\}", r" to the \1 ", text)
    return re.sub(r"\^\s*(\d+|[A-Za-z])", r" to the \1 ", text)


def _math_spans(text: str) -> str:
    """`$...$`, `$$...$$`, `\\[...\\]` and `\\(...\\)` that hold formulas are spoken as math."""
    text = re.sub(r"\$\$(.+?)\$\$", lambda m: " " + _latex(m.group(1)) + " ", text, flags=re.DOTALL)
    text = re.sub(r"\\\[(.+?)\\\]|\\\((.+?)\\\)", lambda m: " " + _latex(m.group(1) or m.group(2)) + " ", text,
                  flags=re.DOTALL)

    def span(m: re.Match) -> str:
        return " " + _latex(m.group(1)) + " " if _is_math(m.group(1)) else m.group(0)

    out, pos = [], 0
    for m in re.finditer(r"(?<!\\)\$([^$]*)(?<!\\)\$", text):
        # "$6 + $8 + $20 = $34": a closing "$" that opens a price, or padded with spaces, is money
        if _is_math(m.group(1)) and not re.match(r"\d", text[m.end():]) and m.group(1) == m.group(1).strip():
            out.append(text[pos:m.start()] + span(m))
            pos = m.end()
    out.append(text[pos:])
    text = "".join(out)
    if "\\" in text:
        text = _latex(text)
    return text


def _money(m: re.Match) -> str:
    sign, symbol, amount, scale = m.group(1) or "", m.group(2), m.group(3).replace(",", ""), m.group(4) or ""
    one, many, sub_one, sub_many = _CURRENCIES[symbol]
    minus = "minus " if sign else ""
    if scale:
        return f"{minus}{say_number(amount)} {scale.lower()} {many}"
    whole, _, frac = amount.partition(".")
    units = int(whole or 0)
    cents = int((frac + "00")[:2]) if frac and sub_many else 0
    if frac and len(frac) > 2 or (frac and not sub_many):
        return f"{minus}{say_number(amount)} {many}"
    parts = []
    if units or not cents:
        parts.append(f"{cardinal(units)} {one if units == 1 else many}")
    if cents:
        parts.append(f"{cardinal(cents)} {sub_one if cents == 1 else sub_many}")
    return minus + " and ".join(parts)


def _currency(text: str) -> str:
    symbols = "".join(re.escape(s) for s in _CURRENCIES)
    text = re.sub(rf"(-\s?)?([{symbols}])\s?({_NUM})(?:\s?(million|billion|thousand|trillion|Million|Billion)\b)?",
                  lambda m: " " + _money(m) + " ", text)
    return re.sub(rf"({_NUM})\s?([{symbols}])", lambda m: f" {say_number(m.group(1))} {_CURRENCIES[m.group(2)][1]} ", text)


def _arithmetic(text: str) -> str:
    """Chains that end in '=' ('16-3-4=9', '24/2=12', '9 * 2 = 18') are sums: read their operators."""
    ops = {"+": " plus ", "-": " minus ", "*": " times ", "x": " times ", "×": " times ", "/": " divided by ",
           "÷": " divided by "}

    def chain(m: re.Match) -> str:
        return re.sub(r"\s*([-+*x×/÷])\s*", lambda o: ops[o.group(1)], m.group(0))

    return re.sub(rf"(?<![\w.])\$?(?:{_NUM})%?(?:\s*[-+*x×/÷]\s*\(?\$?(?:{_NUM})%?\)?)+(?=\s*=)", chain, text)


def _dates_and_times(text: str) -> str:
    months = "|".join(_MONTHS)
    text = re.sub(rf"\b({months})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(,?\s*)(1[0-9]\d\d|20\d\d)?",
                  lambda m: f"{m.group(1)} {say_ordinal(int(m.group(2)))}{m.group(3)}"
                            + (say_year(int(m.group(4))) if m.group(4) else ""), text)
    text = re.sub(r"\b(\d{1,2}):(\d{2})\b(\s*(?:A M|P M|am|pm|AM|PM)\b)?", _clock, text)
    text = re.sub(r"\b(\d{1,2}):(\d)\b(?!\d)", lambda m: f"{cardinal(int(m.group(1)))} to {cardinal(int(m.group(2)))}",
                  text)
    # years: ranges, decades, and four-digit numbers in a year's usual company
    year = r"(?:1[0-9]\d\d|20\d\d)"
    text = re.sub(rf"\b({year})\s*(?:-|to|and|until)\s*({year})\b",
                  lambda m: f"{say_year(int(m.group(1)))} {'and' if 'and' in m.group(0) else 'to'} "
                            f"{say_year(int(m.group(2)))}", text)
    text = re.sub(r"\b(1[0-9]\d0|20\d0)s\b", lambda m: _decade(int(m.group(1))), text)
    before = (r"in|In|since|Since|by|from|From|year|until|till|during|During|around|between|before|Before|after|"
              r"After|early|late|mid|circa|to|of|summer|winter|spring|autumn|fall")
    text = re.sub(rf"\b({before})(\s+|-)({year})\b(?!\.\d|,\d)",
                  lambda m: f"{m.group(1)}{' ' if m.group(2) == '-' else m.group(2)}{say_year(int(m.group(3)))}", text)
    text = re.sub(rf"\b({year})(?=\s+(?:[A-Z][a-z]+|election|presidential|census|season|war|revolution|crisis|"
                  rf"Olympics|BC|AD|BCE|CE)\b)|(?<=[\[(])({year})(?=[\])])|^({year})(?=,)",
                  lambda m: say_year(int(next(g for g in m.groups() if g))), text)
    text = re.sub(r"\b(\d{1,4})\s*(BC|BCE|AD|CE)\b", lambda m: f"{cardinal(int(m.group(1)))} {' '.join(m.group(2))}",
                  text)
    return text


def _decade(n: int) -> str:
    words = say_year(n)
    if words.endswith("y"):
        return words[:-1] + "ies"
    return words + "s"


def _clock(m: re.Match) -> str:
    h, mins, suffix = int(m.group(1)), int(m.group(2)), (m.group(3) or "")
    if h > 24 or mins > 59:
        return m.group(0)
    spoken = f"{cardinal(h)} o'clock" if mins == 0 and not suffix else (
        f"{cardinal(h)}" if mins == 0 else f"{cardinal(h)} {'oh ' + cardinal(mins) if mins < 10 else cardinal(mins)}")
    return spoken + (" " + " ".join(suffix.strip().replace(" ", "").upper()) if suffix.strip() else "")


# Words after an ambiguous unit that show it is one: "2 m long", "5 s later".
_MEASURE_WORDS = {"long", "wide", "high", "tall", "deep", "away", "later", "earlier", "apart", "thick", "each",
                  "per", "of", "from", "and", "or", "to", "at", "for", "with", "above", "below", "across", "by"}


_UNIT_ALT = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
_LABEL = re.compile(r"\b(?:line|option|question|step|figure|table|chapter|page|number|part|item|grade|level|"
                    r"type|class|group|room|row|column)\s*$", re.IGNORECASE)


def _units(text: str) -> str:
    """'25°C' -> 'twenty five degrees Celsius', '470 cal/mole' -> '... calories per mole',
    'J K^-1' -> 'J per kelvin'."""
    alt = _UNIT_ALT
    text = re.sub(rf"(?<![A-Za-z])({alt})\s*to the minus (?:one|1)\b", lambda m: f" per {_UNITS[m.group(1)][0]} ", text)
    text = re.sub(rf"(?<=[a-z])/({alt})(?![A-Za-z0-9])", lambda m: f" per {_UNITS[m.group(1)][0]} ", text)  # rev/s

    def unit(m: re.Match) -> str:
        name = m.group(2)
        nxt = re.match(r"\s*([A-Za-z]+)", m.string[m.end():])
        if name in _AMBIGUOUS_UNITS:
            if m.string[m.end():m.end() + 1] == "-":
                return m.group(0)  # "13C-labelled": an isotope, not a coulomb
            if name == "in" and not m.group(4) and nxt and nxt.group(1) not in _MEASURE_WORDS:
                return m.group(0)  # "5 in the box"
            if _LABEL.search(m.string[: m.start()]):
                return m.group(0)  # "Line 3 to b", "option 2 C": a label, not a measure
            if name == "m" and nxt and nxt.group(1) in ("solution", "aqueous"):
                return f" {say_number(m.group(1))} molal "
        singular, plural = _UNITS[name]
        value = m.group(1).replace(",", "").lstrip("+")
        words = f" {say_number(m.group(1))} {singular if value in ('1', '1.0', '-1') else plural}"
        if m.group(3):
            den = m.group(3)
            words += f" per {_UNITS[den][0] if den in _UNITS else den}"
        return words + " "

    # group 4: the full stop of an abbreviated unit inside a sentence ("100 ml. of a solution")
    return re.sub(rf"(-?(?:{_NUM}))(?:\s*|-)({alt})(?:/({alt}|[a-z]+))?(?![A-Za-z0-9°])(\.(?=\s+[a-z]))?", unit, text)


def _chemistry(text: str) -> str:
    """'CO2' -> 'C O 2', '13CH3' -> '13 C H 3': formulas are read element by element."""
    def formula(m: re.Match) -> str:
        token = m.group(0)
        parts = re.findall(r"\d+|[A-Z][a-z]?", token)
        return " ".join(parts)

    return re.sub(r"\b\d*(?:[A-Z][a-z]?\d*){1,6}\b", lambda m: formula(m) if re.search(r"[A-Z][a-z]?\d", m.group(0))
                  and not re.fullmatch(r"[A-Z]\d+", m.group(0)) else m.group(0), text)


def _numbers(text: str) -> str:
    text = re.sub(rf"(?<![\w.])({_NUM})\s?%", lambda m: f" {say_number(m.group(1))} percent ", text)
    text = re.sub(r"\b(\d+)\s*(st|nd|rd|th)\b", lambda m: f" {say_ordinal(int(m.group(1)))} ", text)
    text = re.sub(r"(?<![\w.])(\d+)\s+(\d+)/(\d+)\b(?!\s*[/\d])",
                  lambda m: f" {cardinal(int(m.group(1)))} and {say_fraction(int(m.group(2)), int(m.group(3)))} ", text)
    text = re.sub(r"(?<![\w.])(\d+)\s*/\s*(\d+)\b(?![.,]\d)",
                  lambda m: f" {say_fraction(int(m.group(1)), int(m.group(2)))} ", text)
    text = re.sub(rf"(?<=\d)\s+-\s+(?=\$?\d)", " minus ", text)
    text = re.sub(r"(?<=\d)\s*[x×]\s*(?=\d)", " times ", text)
    text = re.sub(r"(?<![\w.-])(\d+)-(\d+)(?![\w.-])", lambda m: f"{m.group(1)} to {m.group(2)}", text)
    text = re.sub(rf"(?<![\w.)])-\s?({_NUM})", lambda m: f" minus {say_number(m.group(1))} ", text)
    text = re.sub(rf"(?<![\d])({_NUM})", lambda m: f" {say_number(m.group(0))} ", text)
    return re.sub(r"\d+", lambda m: f" {cardinal(int(m.group(0)))} ", text)  # anything left: digits one by one


def _functions(text: str) -> str:
    """'f(x)' -> 'f of x', 'Θ(n log n)' -> 'Θ of n log n'."""
    text = re.sub(r"\bsqrt\s*\(([^()]*)\)", r" the square root of \1 ", text)
    return re.sub(r"(?<![\w'])([A-Za-zΑ-Ωα-ω])\(([^()]{1,30})\)", r"\1 of \2", text)


def _symbols(text: str) -> str:
    text = re.sub(r"(?<![\w-])([a-z])\s?-\s?([a-z])(?![\w-])", r"\1 minus \2", text)  # x-y
    text = re.sub(r"(?<=\w)\s*\|\|\s*(?=\w)", " ∥ ", text)
    text = re.sub(r"(?<![\w|])\|([^|\n]{1,30})\|(?![\w|])", r" the absolute value of \1 ", text)
    text = re.sub(r"(?<=[A-Za-z0-9])•", " dot ", text)
    text = text.replace("•", " and ")
    for k in sorted(_SYMBOLS, key=len, reverse=True):
        text = text.replace(k, _SYMBOLS[k])
    for ch, name in _GREEK.items():
        if ch in text:
            text = re.sub(rf"{ch}", f" {name} ", text)
    text = re.sub(r"\s*/\s*(?=(?:year|month|week|day|hour|minute|second|person|piece|unit|item|gallon|mile|pound|"
                  r"kilogram|meter|foot|liter|ounce)s?\b)", " per ", text)
    text = re.sub(r"(?<=[A-Za-z])/(?=[A-Za-z])", " or ", text)
    return text.replace("/", " over ")


def _tidy(text: str) -> str:
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
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r"^[,.;:]\s*", "", text)


def to_spoken(text: str) -> str:
    """The spoken form of display text. The result has no digits and no math or markup symbols."""
    text = _clean(text)
    text = _gsm8k(text)
    text = _signs(text)
    text = _abbreviations(text)
    text = _math_spans(text)
    text = _powers(text)
    text = _arithmetic(text)
    text = _currency(text)
    text = _dates_and_times(text)
    text = _units(text)
    text = _chemistry(text)
    text = _functions(text)
    text = _numbers(text)
    text = _symbols(text)
    return _tidy(text)


def is_speakable(spoken: str) -> bool:
    """True when spoken text has words and nothing a voice cannot read."""
    return bool(spoken_words(spoken)) and not UNSPEAKABLE.search(spoken)


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

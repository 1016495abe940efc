"""Amounts with a unit: measures ('25°C', '2.5 kg', '470 cal/mole') and money ('$4.95', '€3 million').

Both read the number and its unit together, singular or plural, before the numerals pass would
read the number alone. A measure in front of its noun takes the singular, as a person reads it:
'a 200 GB file' is 'a two hundred gigabyte file', 'a $5 bill' 'a five dollar bill' (`_attributive`).
Units that are also words ('in', 'm', 'C') are taken only where the context says they are units.
"""

from __future__ import annotations

import re

from kame_data.text.numbers import NUM, VALUE, cardinal, plural_of, say_fraction, say_mixed, say_number

# unit -> (singular, plural)
_UNITS: dict[str, tuple[str, str]] = {
    "km": ("kilometer", "kilometers"), "m": ("meter", "meters"), "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"), "dm": ("decimeter", "decimeters"), "μm": ("micrometer", "micrometers"), "nm": ("nanometer", "nanometers"),
    "kg": ("kilogram", "kilograms"), "g": ("gram", "grams"), "mg": ("milligram", "milligrams"),
    "μg": ("microgram", "micrograms"), "lb": ("pound", "pounds"), "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"), "ft": ("foot", "feet"), "in": ("inch", "inches"), "mi": ("mile", "miles"),
    "yd": ("yard", "yards"), "mph": ("mile per hour", "miles per hour"), "km/h": ("kilometer per hour", "kilometers per hour"),
    "m/s": ("meter per second", "meters per second"), "h": ("hour", "hours"), "hr": ("hour", "hours"),
    "hrs": ("hour", "hours"), "min": ("minute", "minutes"), "s": ("second", "seconds"), "sec": ("second", "seconds"),
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
    "M": ("molar", "molar"), "dB": ("decibel", "decibels"), "Å": ("angstrom", "angstroms"),
    "pm": ("picometer", "picometers"), "lbm": ("pound mass", "pounds mass"), "Btu": ("B T U", "B T U"), "°R": ("degree Rankine", "degrees Rankine"), "μmol": ("micromole", "micromoles"), "nmol": ("nanomole", "nanomoles"),
    "mi/h": ("mile per hour", "miles per hour"), "ft/s": ("foot per second", "feet per second"),
    # engineering and physics units of MMLU-Pro rows ("1.5 MPa", "10 mH", "1200 rpm", "10 hp", "20 cc")
    "MPa": ("megapascal", "megapascals"), "GPa": ("gigapascal", "gigapascals"), "mH": ("millihenry", "millihenries"),
    "μH": ("microhenry", "microhenries"), "rpm": ("revolution per minute", "revolutions per minute"),
    "hp": ("horsepower", "horsepower"), "cc": ("cubic centimeter", "cubic centimeters"), "psi": ("P S I", "P S I"),
    "keV": ("kilo electron volt", "kilo electron volts"), "MeV": ("mega electron volt", "mega electron volts"),
    "GeV": ("giga electron volt", "giga electron volts"), "kA": ("kiloampere", "kiloamperes"),
    "μA": ("microampere", "microamperes"), "Wb": ("weber", "webers"), "mT": ("millitesla", "millitesla"),
    "μT": ("microtesla", "microtesla"), "nF": ("nanofarad", "nanofarads"), "pF": ("picofarad", "picofarads"),
    "mW": ("milliwatt", "milliwatts"), "GW": ("gigawatt", "gigawatts"), "MJ": ("megajoule", "megajoules"),
    "mJ": ("millijoule", "millijoules"), "kmol": ("kilomole", "kilomoles"), "MΩ": ("megohm", "megohms"),
}
# Areas and volumes: '125 ft^2' is 'one hundred and twenty five square feet', '20 cm^3' 'twenty cubic
# centimeters' (`units` turns 'ft squared' after a number into 'ft²' first).
_LENGTHS = ("km", "m", "dm", "cm", "mm", "μm", "nm", "ft", "in", "yd", "mi")
for _u in _LENGTHS:
    _UNITS[f"{_u}²"] = tuple(f"square {w}" for w in _UNITS[_u])  # type: ignore[assignment]
    _UNITS[f"{_u}³"] = tuple(f"cubic {w}" for w in _UNITS[_u])  # type: ignore[assignment]
_AREA = re.compile(rf"(\d)(\s*|-)({'|'.join(re.escape(u) for u in _LENGTHS)})\s+(squared|cubed)\b"
                   r"(?!\s*(?:[-+=*/]|(?:minus|plus|times|equals)\b))")  # not in a sum: '4m^2 + 3m'

# Every unit as symbol or as said ('kg', 'kilograms', 'meters squared'), and abbreviations the table leaves to
# context ('sec', 'hr', 'deg', 'dL'): a slash next to one is 'per' (kame_data/text/symbols.py `_solidus`).
UNIT_WORDS = frozenset({*_UNITS, *(n.split()[-1] for names in _UNITS.values() for n in names),
                        "sec", "secs", "hr", "hrs", "deg", "dL", "dl", "gm", "gms", "kw", "yr", "yrs", "day", "days",
                        "week", "month", "year", "hour", "minute", "second"})

# Units that are also ordinary words or letters: only taken right after a number and when no
# letter follows ("5 in." yes, "5 in the box" no; "2 m long" yes).
_AMBIGUOUS_UNITS = {"in", "s", "h", "m", "l", "L", "g", "K", "N", "J", "V", "W", "C", "F", "T", "M", "min", "mi"}
# Words that make a bare 'C' after a number a temperature, not a charge in coulombs.
_TEMPERATURE = re.compile(r"\b(?:temperatures?|boil(?:s|ing|ed)?|melt(?:s|ing|ed)?|freez(?:es|ing)|heated|cooled|warm(?:er|ed)?|"
                          r"cold(?:er)?|hot(?:ter)?|thermometer|°)", re.IGNORECASE)
_CHARGE = re.compile(r"\b(?:charges?|coulombs?|capacit\w*|currents?|electrons?|ions?|flows?|field|potential|"
                     r"amperes?|batter(?:y|ies)|cells?|electrolysis|faraday)\b", re.IGNORECASE)
# Words after an ambiguous unit that show it is one: "2 m long", "5 s later".
_MEASURE_WORDS = {"long", "wide", "high", "tall", "deep", "away", "later", "earlier", "apart", "thick", "each",
                  "per", "of", "from", "and", "or", "to", "at", "for", "with", "above", "below", "across", "by"}
_UNIT_ALT = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
_LABEL = re.compile(r"\b(?:line|option|question|step|figure|table|chapter|page|number|part|item|grade|level|"
                    r"type|class|group|room|row|column)\s*$", re.IGNORECASE)
_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
               "£": ("pound", "pounds", "penny", "pence"), "¥": ("yen", "yen", "", "")}


def _attributive(m: re.Match, start: int, joined: bool = False) -> bool:
    """Whether the measure matched by `m` (beginning at `start`) stands in front of its noun: joined to
    its number by a hyphen ('a 5-km race'), or right after 'a'/'an' ('a 200 GB file', 'a 3 m long rope',
    'a 60 km/h zone'), where a plural could only follow as 'of' ('a 1.5 kg of' is not English either).
    'The 200 GB file' is left plural: after 'the' a relative clause may follow ('the $20 he spent'),
    which no word list tells from a noun."""
    if joined:
        return True
    if not re.search(r"(?:^|[^\w])(?:a|an|A|An)\s*$", m.string[:start]):
        return False
    return not re.match(r"\s*of\b", m.string[m.end():])


def equivalents(text: str) -> str:
    """A measure restated in brackets in other units is read as 'or': '2.0 ft. (0.610 m) high' ->
    '2.0 ft, or 0.610 m, high', '500°F(523.3 K)' -> '500°F, or 523.3 K,' (the units pass then reads
    both). Runs before the asides pass, which would drop the brackets and run the two together."""
    measure = rf"(?:{VALUE})\s*(?:{_UNIT_ALT})"

    def said(m: re.Match) -> str:
        more = re.match(r"\s*\w", m.string[m.end():])  # the sentence goes on: close the aside with a comma
        return f"{m.group(1)}, or {m.group(2)}{',' if more else ''}"

    return re.sub(rf"(?<![\w.])({measure})\.?\s*\(\s*({measure})\s*\)(?!\w)", said, text)


_DETERMINER = (r"(?:a|an|the|any|each|every|one|two|three|four|five|six|seven|eight|nine|ten|several|some|many|"
               r"these|those|this|that|his|her|their|its|my|our|your|\d+)")


# Words before '6s' that make it the plural of a number ('rolled two 6s', 'in his 40s', 'count by 5s',
# '3s and 4s'), not six seconds ('takes 5s', 'for 2s', 'the first 2s').
_NUMBER_PLURAL = re.compile(r"\b(?:the|his|her|their|my|your|our|two|three|four|five|six|seven|eight|nine|ten|all|"
                            r"by|some|many|few|early|late|mid|and|or)\s*$", re.IGNORECASE)


def dimensions(text: str) -> str:
    """Numbers joined by 'x' in front of a noun are a size, read 'by': 'ten 2 x 4 x 10 boards', 'any
    20 × 20 array', 'a 3 x 3 matrix', 'the 2 x 4s' ('two by fours', not 'four seconds'). After a verb
    ('earns 15 x 3 dollars') or before '=' they stay a product, read by the arithmetic pass."""
    def size(m: re.Match) -> str:
        said = [say_number(n) for n in re.split(r"\s*[x×]\s*", m.group(2))]
        if m.group(3).startswith("s"):  # 'the 2 x 4s'
            said[-1] = plural_of(said[-1])
        return f"{m.group(1)}{' by '.join(said)} "

    if not re.search(r"\d\s*[x×]\s*\d", text):
        return text
    return re.sub(rf"(\b{_DETERMINER}\s+)(\d+(?:\s*[x×]\s*\d+)+)(s\b\s*|\s+(?=[a-z]))"
                  r"(?![a-z]*\s*=|(?:is|are|was|were|equals?|makes?|gives?|and|or|plus|minus|times)\b)", size, text,
                  flags=re.IGNORECASE)


def units(text: str) -> str:
    """'25°C' -> 'twenty five degrees Celsius', '470 cal/mole' -> '... calories per mole',
    'J K^-1' -> 'J per kelvin'."""
    alt = _UNIT_ALT
    text = _AREA.sub(lambda m: f"{m[1]}{m[2] or ' '}{m[3]}{'²' if m[4] == 'squared' else '³'}", text)
    # dimensions: '3 m x 4 m', '10 cm × 20 cm' are read 'by'
    text = re.sub(rf"(?<![\w.])({VALUE})\s*({alt})\s*[x×]\s*(?=\d)", r"\1 \2 by ", text)
    text = re.sub(rf"(?<![A-Za-z])({alt})\s*to the minus (?:one|1)\b", lambda m: f" per {_UNITS[m.group(1)][0]} ", text)
    text = re.sub(rf"(?<=[a-z])/({alt})(?![A-Za-z0-9])", lambda m: f" per {_UNITS[m.group(1)][0]} ", text)  # rev/s
    text = re.sub(rf"(?<=\d)\s*/\s*({alt})(?![A-Za-z0-9/°])",  # '96/min', a count per unit (a letter alone is a variable)
                  lambda m: f" per {_UNITS[m.group(1)][0]} " if len(m.group(1)) > 1 else m.group(0), text)

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
            glued = m.string[m.start(2) - 1].isdigit()
            after_op = r"\s*(?:(?:squared|cubed)\s*)?(?:[-+=*/]|(?:minus|plus|times|equals)\b)"
            if glued and len(name) == 1 and (re.match(after_op, m.string[m.end():])
                                             or re.search(r"(?:[-+=*/]|\b(?:minus|plus|times))\s*$",
                                                          m.string[:m.start()])):
                return m.group(0)  # "7m + 12n = 22": a variable in an equation, not meters
            if name == "s" and glued and m.group(1).isdigit() and _NUMBER_PLURAL.search(m.string[:m.start()]):
                return f" {plural_of(say_number(m.group(1)))} "  # "two 6s", "in his 40s": sixes, forties
            if name == "C" and not m.group(3):  # '80 C': Celsius by a boiling point, coulombs by a charge, else 'C'
                if _TEMPERATURE.search(m.string):
                    return f" {say_number(m.group(1))} degrees Celsius "
                if not _CHARGE.search(m.string):
                    return f" {say_number(m.group(1))} C "
            if name == "m" and nxt and nxt.group(1) in ("solution", "aqueous"):
                return f" {say_number(m.group(1))} molal "
        singular, plural = _UNITS[name]
        attributive = _attributive(m, m.start(), m.string[m.end(1):m.start(2)] == "-")
        value = m.group(1).replace(",", "").lstrip("+")
        minus, value = ("minus ", value[1:].lstrip()) if value.startswith("-") else ("", value)
        frac = re.fullmatch(r"(?:(\d+)\s+)?(\d+)/(\d+)", value)
        if frac and not frac.group(1) and int(frac.group(2)) < int(frac.group(3)):  # '3/4 in.'
            article = "an" if singular[0] in "aeiou" else "a"
            words = f" {say_fraction(int(frac.group(2)), int(frac.group(3)))} of {article} {singular}"
        elif frac:  # '1 1/2 in.'
            whole = cardinal(int(frac.group(1))) if frac.group(1) else ""
            said = say_mixed(whole, int(frac.group(2)), int(frac.group(3))) if whole else \
                say_fraction(int(frac.group(2)), int(frac.group(3)))
            words = f" {said} {singular if attributive else plural}"
        else:
            one = re.fullmatch(r"0*1(?:\.0*)?", value) is not None or attributive  # '1', '1.00'
            words = f" {say_number(value)} {singular if one else plural}"
        words = f" {minus}{words.lstrip()}"
        if m.group(3):
            den = m.group(3)
            words += f" per {_UNITS[den][0] if den in _UNITS else den}"
        return words + " "

    # group 4: the full stop of an abbreviated unit inside a sentence ("100 ml. of a solution")
    # group 1: the value with its sign, glued ('-3/4 in') or spaced where nothing precedes it ('= - 5 m')
    text = re.sub(rf"(?<![\d/])((?:-|(?<![\w.)])-\s)?(?:{VALUE}))(?:\s*|-)({alt})(?:/({alt}|[a-z]+))?(?![A-Za-z0-9°])(\.(?=\s+[a-z]))?", unit, text)
    # an area the unit pass did not take ('0/0/0m squared': m a variable there) says its power again
    return bare_units(text.replace("²", " squared").replace("³", " cubed"))


# Unit symbols that are never words, said in full without a number: 'in °C', 'measured in Å'.
_BARE = ("°C", "°F", "Å", "μm", "μs", "μg", "μL", "nm", "cm", "km", "kg", "kWh", "kJ", "kPa",
         "MHz", "GHz", "kHz", "mph", "km/h", "m/s", "mi/h", "ft/s")


def bare_units(text: str) -> str:
    """'in km/h' -> 'in kilometers per hour', 'in °C' -> 'in degrees Celsius', 'J/mol' -> 'joules per
    mole': a unit without a number is said in the plural; a pair of units with a slash is a rate."""
    alt = _UNIT_ALT

    def pair(m: re.Match) -> str:
        a, b = m.group(1), m.group(2)
        if a in _AMBIGUOUS_UNITS and b in _AMBIGUOUS_UNITS and f"{a}/{b}" not in _UNITS:
            return m.group(0)  # "a/b", "m/n": letters, not units
        return f" {_UNITS[a][1]} per {_UNITS[b][0]} "

    text = re.sub(rf"(?<![\w/°])({alt})/({alt})(?![\w/])", pair, text)
    bare = "|".join(re.escape(u) for u in sorted(_BARE, key=len, reverse=True))
    return re.sub(rf"(?<![\w/])({bare})(?![\w/])", lambda m: f" {_UNITS[m.group(1)][1]} ", text)


def _money(m: re.Match) -> str:
    """'$4.95' -> 'four dollars and ninety five cents'; the sign on either side of the symbol
    ('-$5', '$-5'); in front of a noun, the singular ('a $5 bill', 'a $1.5 million grant')."""
    sign, symbol, amount, scale = m.group(1) or m.group(3) or "", m.group(2), m.group(4).replace(",", ""), m.group(5) or ""
    one, many, sub_one, sub_many = _CURRENCIES[symbol]
    minus = "minus " if sign else ""
    whole, _, frac = amount.partition(".")
    attributive = not sign and _attributive(m, m.start())
    if scale:
        return f"{minus}{say_number(amount)} {scale.lower()} {one if attributive else many}"
    units = int(whole or 0)
    cents = int((frac + "00")[:2]) if frac and sub_many else 0
    if frac and len(frac) > 2 or (frac and not sub_many):
        return f"{minus}{say_number(amount)} {many}"
    if attributive and not (units and cents):  # 'a five dollar tip', 'a fifty cent coin'
        return f"{cardinal(units)} {one}" if units or not cents else f"{cardinal(cents)} {sub_one}"
    parts = []
    if units or not cents:
        parts.append(f"{cardinal(units)} {one if units == 1 else many}")
    if cents:
        parts.append(f"{cardinal(cents)} {sub_one if cents == 1 else sub_many}")
    return minus + " and ".join(parts)


def currency(text: str) -> str:
    symbols = "".join(re.escape(s) for s in _CURRENCIES)
    text = re.sub(rf"(-\s?)?([{symbols}])\s?(-\s?)?({NUM})(?:\s?(million|billion|thousand|trillion|Million|Billion)\b)?",
                  lambda m: " " + _money(m) + " ", text)
    return re.sub(rf"({NUM})\s?([{symbols}])", lambda m: f" {say_number(m.group(1))} {_CURRENCIES[m.group(2)][1]} ", text)

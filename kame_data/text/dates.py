"""Dates, clock times, ratios and years.

'1989' is 'nineteen eighty nine' only where it reads as a year ('in 1989', 'the 1980s',
'1914-1918', 'the treaty of 1648'); a count stays a number ('it comes to 1240 trees', 'a total of
1907', 'in 1200 years', 'by 1500 people'). '7:11' is a ratio ('seven to eleven') unless it reads as a time:
'at 7:11', '10:30', '4:00 PM'; 24-hour times are said the 12-hour way ('16:00' -> 'four P M') and
ranges keep their 'to' ('1:00 PM - 6:00 PM').
"""

from __future__ import annotations

import re

from kame_data.text.numbers import cardinal, plural_of, say_ordinal, say_year

_MONTHS = ("January February March April May June July August September October November December "
           "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec").split()
_YEAR = r"(?:1[0-9]\d\d|20\d\d)"
# A number followed by a measure ('1200 feet', 'in 1200 years') counts things: no year. After a
# weak cue ('by', 'from', 'of') any plural noun counts ('by 1500 people', 'of 1240 trees').
_MEASURES = (r"(?:years|months|weeks|days|hours|minutes|seconds|feet|miles|meters|metres|kilometers|yards|inches|"
             r"pounds|dollars|cents|euros|people|persons|men|women|children|pieces|words|pages|points|times|units|"
             r"items|copies|calories|gallons|liters|litres|grams|kilograms|km|m|kg|g|mi|ft|lb|lbs)")
_PLURAL = (r"(?!(?:is|was|has|as|this|its|his|us|thus|always|perhaps|whereas|besides|towards|does|goes|yes)\b)"
           r"(?:[a-z]+s|people|feet|men|women|children|sheep|fish|deer|teeth|mice|geese)")
_COUNTED = rf"(?!\s+{_MEASURES}\b)"
_COUNTED_WEAK = rf"(?!\s+(?:{_MEASURES}|{_PLURAL})\b)"
# Words after which a four-digit number is a year (unless it counts something).
_YEAR_CUES = (r"in|In|since|Since|year|until|Until|till|during|During|circa|summer|winter|spring|autumn|fall|"
              r"early|late|mid|as of|back to|end of|start of|beginning of")
_WEAK_CUES = r"by|By|from|From|around|Around|between|before|Before|after|After"
# Amounts before "of": 'a total of 1907', 'a price of 1500' are numbers; 'the typhoon of 2014' a year.
_AMOUNT = re.compile(r"total|sum|average|maximum|minimum|cost|price|value|number|amount|balance|profit|loss|budget|score|"
           r"count|population|distance|height|weight|length|area|volume|speed|rate|salary|fee|revenue|sales?|"
           r"debt|fine|deposit|payment|bill|charge|income|capacity|depth|width|mass|pressure|temperature|"
           r"multiple|factor|product|quotient|difference|increase|decrease|range|set|group|batch|crowd")
_SUFFIX = r"(?:A M|P M|am|pm|AM|PM|a\.m\.|p\.m\.)"
_CLOCK = rf"(\d{{1,2}}):(\d{{2}})(?!:?\d)(?:\s*({_SUFFIX})\b)?|(\d{{1,2}})\s*({_SUFFIX})(?![A-Za-z])"
_TIME_CUE = re.compile(r"\b(?:at|by|until|till|from|before|after|around|past|since|between|starts?|ends?|opens?|"
                       r"closes?|leaves?|arrives?|wakes?|o'clock|noon|midnight|morning|afternoon|evening|night)\W*$",
                       re.IGNORECASE)
_RATIO_CUE = re.compile(r"\b(?:ratios?|proportions?|odds|scale|mix(?:ture)?|parts?)\b", re.IGNORECASE)


def dates_and_times(text: str) -> str:
    months = "|".join(_MONTHS)
    text = re.sub(rf"\b({months})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(,?\s*)({_YEAR})?",
                  lambda m: f"{m.group(1)} {say_ordinal(int(m.group(2)))}{m.group(3)}"
                            + (say_year(int(m.group(4))) if m.group(4) else ""), text)
    text = clock_times(text)
    # years: ranges, decades, and four-digit numbers in a year's usual company
    text = re.sub(rf"\b({_YEAR})\s*(?:-|to|and|until)\s*({_YEAR})\b{_COUNTED}", _year_range, text)
    text = re.sub(r"\b(1[0-9]\d0|20\d0)s\b", lambda m: plural_of(say_year(int(m.group(1)))), text)
    for cues, guard in ((_YEAR_CUES, _COUNTED), (_WEAK_CUES, _COUNTED_WEAK)):
        text = re.sub(rf"\b({cues})(\s+|-)({_YEAR})\b(?!\.\d|,\d|\s*%){guard}",
                      lambda m: f"{m.group(1)}{' ' if m.group(2) == '-' else m.group(2)}{say_year(int(m.group(3)))}",
                      text)
    text = re.sub(rf"\b(\w+)\s+of\s+(?<![.,])({_YEAR})\b(?!\.\d|,\d|\s*%){_COUNTED_WEAK}",
                  lambda m: m.group(0) if _AMOUNT.fullmatch(m.group(1).lower())
                  else f"{m.group(1)} of {say_year(int(m.group(2)))}", text)
    text = re.sub(rf"(?<![.,])\b({_YEAR})(?=\s+(?:[A-Z][a-z]+|election|presidential|census|season|war|revolution|crisis|"
                  rf"Olympics|BC|AD|BCE|CE)\b)|(?<=[\[(])({_YEAR})(?=[\])])|^({_YEAR})(?=,)",
                  lambda m: say_year(int(next(g for g in m.groups() if g))), text)
    # a citation's year ('(Smith, 1946)', 'Smith et al., 2001'); a bare option '1935' stays a number: an option
    # is said alone in the answer turn and the answer key, and must read the same there as in the question
    text = re.sub(rf"(\b[A-Z][a-z]+(?: et al\.| and others)?,\s)({_YEAR})(?=\s*[);.]|$)",
                  lambda m: m.group(1) + say_year(int(m.group(2))), text) if "," in text else text
    text = re.sub(r"\b(\d{1,4})\s*(BC|BCE|AD|CE)\b", lambda m: f"{cardinal(int(m.group(1)))} {' '.join(m.group(2))}",
                  text)
    return text


def _year_range(m: re.Match) -> str:
    """Both ends the same way: 'two thousand and seven to two thousand and ten', not '... to twenty ten'."""
    a, b = int(m.group(1)), int(m.group(2))
    joiner = "and" if re.search(r"\band\b", m.group(0)) else "to"
    if any(2000 <= y <= 2009 for y in (a, b)) and all(2000 <= y <= 2099 for y in (a, b)):
        return f"{cardinal(a)} {joiner} {cardinal(b)}"
    return f"{say_year(a)} {joiner} {say_year(b)}"


def clock_times(text: str) -> str:
    """Times and ratios written with a colon, and time ranges."""
    text = re.sub(rf"\b(?:{_CLOCK})\s*(?:-|to|until|till)\s*(?:{_CLOCK})", _time_range, text)
    text = re.sub(r"(?<![\d:])(\d+)((?::\d+)+)(?![\d:])", _colon, text)
    return re.sub(rf"\b{_CLOCK}", lambda m: _time(*m.groups()), text)


def _time_range(m: re.Match) -> str:
    """'1:00 PM - 6:00 PM' -> 'one P M to six P M'; '9:00-17:00' -> 'nine A M to five P M'."""
    first, second = list(m.groups()[:5]), list(m.groups()[5:])
    if first[0] and second[0] and not first[2] and not second[2] and int(first[0]) < 12 < int(second[0]):
        first[2] = "AM"
    return f"{_time(*first)} to {_time(*second)}"


def _colon(m: re.Match) -> str:
    """'7:11' in a ratio's company, '2:3:5', '3:2' -> 'seven to eleven'; times are left for `_time`."""
    parts = [m.group(1)] + m.group(2).split(":")[1:]
    before = m.string[:m.start()]
    sentence = re.split(r"[.?!]\s", before)[-1] + m.string[m.end():m.end() + 40]
    if len(parts) == 2 and len(parts[1]) == 2 and int(parts[0]) <= 24 and int(parts[1]) <= 59 \
            and not _RATIO_CUE.search(sentence) \
            and (int(parts[1]) % 5 == 0 or _TIME_CUE.search(before[-30:]) or re.match(rf"\s*{_SUFFIX}", m.string[m.end():])):
        return m.group(0)
    return " to ".join(cardinal(int(p)) for p in parts)


def _time(h: str | None, mins: str | None, suffix: str | None, bare_h: str | None = None,
          bare_suffix: str | None = None) -> str:
    """One clock time: '2:00' -> "two o'clock", '10:30' -> 'ten thirty', '16:00' -> 'four P M',
    '5pm' -> 'five P M'."""
    if bare_h is not None:
        if not 1 <= int(bare_h) <= 12:  # '74 pm' is a length in picometers, not a time: the units pass reads it
            return f"{bare_h} {bare_suffix}"
        h, mins, suffix = bare_h, "00", bare_suffix
    hour, minute = int(h), int(mins)
    if hour > 24 or minute > 59:
        return f"{h}:{mins}"
    half = (suffix or "").replace(".", "").replace(" ", "").upper()
    if not half and (hour > 12 or hour == 0):  # a 24-hour time, said the 12-hour way
        half, hour = ("PM" if 12 < hour < 24 else "AM"), (hour - 12 if hour > 12 else 12)
    elif half == "PM" and hour > 12:
        hour -= 12
    said = cardinal(hour)
    if minute:
        said += f" {'oh ' + cardinal(minute) if minute < 10 else cardinal(minute)}"
    elif not half:
        said += " o'clock"
    return said + (f" {' '.join(half)}" if half else "")

"""Dates, clock times and years: '1989' is 'nineteen eighty nine' only where it reads as a year
('in 1989', 'the 1980s', '1914-1918'); elsewhere it stays a number for the numerals pass."""

from __future__ import annotations

import re

from kame_data.text.numbers import cardinal, say_ordinal, say_year

_MONTHS = ("January February March April May June July August September October November December "
           "Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec").split()


def dates_and_times(text: str) -> str:
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

"""Spoken-form normalisation: what the voices read."""

import re

import pytest

from kame_data.script.normalize import spoken_words, to_spoken

CASES = [
    ("She sells the remainder for $2 per egg.", "She sells the remainder for two dollars per egg."),
    ("He buys a house for $80,000.", "He buys a house for eighty thousand dollars."),
    ("The list price is $4.95.", "The list price is four dollars and ninety five cents."),
    ("It increased by 150%.", "It increased by one hundred and fifty percent."),
    ("16-3-4=<<16-3-4=9>>9 duck eggs", "sixteen minus three minus four equals nine duck eggs"),
    ("#### 70000", "The answer is seventy thousand"),
    ("Half of 24 is 24/2=12.", "Half of twenty four is twenty four halves equals twelve."),
    ("three 1/4 cups", "three one quarter cups"),
    ("a 3/8 inch bolt", "a three eighths inch bolt"),
    ("the 3rd and 21st days", "the third and twenty first days"),
    ("It weighs 2.5 kg", "It weighs two point five kilograms"),
    ("runs 60 mph", "runs sixty miles per hour"),
    ("born in 1989", "born in nineteen eighty nine"),
    (r"$\frac{1}{2}$ of $x^2$", "one over two of x squared"),
    (r"$S_{10}$ has 10 elements", "S sub ten has ten elements"),
    ("e.g. apples", "for example apples"),
    ("It is -5 degrees", "It is minus five degrees"),
    ("a < b", "a less than b"),
    ("Control\x07chars", "Control chars"),
]


@pytest.mark.parametrize("display,spoken", CASES)
def test_cases(display, spoken):
    assert to_spoken(display) == spoken


@pytest.mark.parametrize("display", [c[0] for c in CASES])
def test_no_symbols_left(display):
    assert not re.search(r"[0-9$\\]|<<|####", to_spoken(display))


def test_spoken_words_strip_punctuation():
    assert spoken_words("It's A, the Sherman Act. 'Quoted'") == ["It's", "A", "the", "Sherman", "Act", "Quoted"]

"""Spoken-form normalisation: what the voices read.

FIXTURE_CASES are short phrases from the real benchmark rows (MMLU-Pro, GSM8K, HSSBench,
MT-Bench) with the spoken form we want: money, arithmetic, fractions, units, LaTeX, symbols,
dates. The last test runs every kept fixture item through the script stage.
"""

import re

import pytest

from kame_data.text import (
    UNSPEAKABLE,
    is_speakable,
    say_fraction,
    spoken_words,
    to_spoken,
)

CASES = [
    ("She sells the remainder for $2 per egg.", "She sells the remainder for two dollars per egg."),
    ("He buys a house for $80,000.", "He buys a house for eighty thousand dollars."),
    ("The list price is $4.95.", "The list price is four dollars and ninety five cents."),
    ("It increased by 150%.", "It increased by one hundred and fifty percent."),
    ("16-3-4=<<16-3-4=9>>9 duck eggs", "sixteen minus three minus four equals nine duck eggs"),
    ("#### 70000", "The answer is seventy thousand"),
    ("Half of 24 is 24/2=12.", "Half of twenty four is twenty four divided by two equals twelve."),
    ("three 1/4 cups", "three and a quarter cups"),
    ("a 3/8 inch bolt", "a three eighths inch bolt"),
    ("the 3rd and 21st days", "the third and twenty first days"),
    ("It weighs 2.5 kg", "It weighs two point five kilograms"),
    ("runs 60 mph", "runs sixty miles per hour"),
    ("born in 1989", "born in nineteen eighty nine"),
    (r"$\frac{1}{2}$ of $x^2$", "one half of x squared"),
    (r"$S_{10}$ has 10 elements", "S sub ten has ten elements"),
    ("e.g. apples", "for example apples"),
    ("It is -5 degrees", "It is minus five degrees"),
    ("a < b", "a less than b"),
    ("Control\x07chars", "Control chars"),
    # dotted initialisms, letter by letter; the last dot ends a sentence only where one ends
    ("the U.S.A. and the U.K. agreed", "the U S A and the U K agreed"),
    ("He moved to the U.S. It was 5 p.m.", "He moved to the U S. It was five P M."),
    ("Washington, D.C., has a Ph.D. program", "Washington, D C, has a P H D program"),
    ("the U.S. Supreme Court and J.K. Rowling", "the U S Supreme Court and J K Rowling"),
]

# Phrases from the fixture rows (kame-data's own selection), display -> spoken.
FIXTURE_CASES = [
    ('She sells the remainder for $2 per fresh duck egg.', 'She sells the remainder for two dollars per fresh duck egg.'),
    ('The list price of a book is $4.95.', 'The list price of a book is four dollars and ninety five cents.'),
    ('It sells at a net price of $2.95.', 'It sells at a net price of two dollars and ninety five cents.'),
    ('$0.95', 'ninety five cents'),
    ('It costs each firm $1,500 per period.', 'It costs each firm one thousand five hundred dollars per period.'),
    ('With a budget of $200 million,', 'With a budget of two hundred million dollars,'),
    ('a budget deficit of $30 billion', 'a budget deficit of thirty billion dollars'),
    ('Paul owed $56.30 plus a 3% sales tax.', 'Paul owed fifty six dollars and thirty cents plus a three percent sales tax.'),
    ('$3022.50', 'three thousand and twenty two dollars and fifty cents'),
    ('an annual pension of $50,000/year', 'an annual pension of fifty thousand dollars per year'),
    ('a total of $6 + $8 + $20 = $<<6+8+20=34>>34', 'a total of six dollars plus eight dollars plus twenty dollars equals thirty four dollars'),
    ('She makes 9 * 2 = $<<9*2=18>>18 every day', 'She makes nine times two equals eighteen dollars every day'),
    ('when wages are $10?', 'when wages are ten dollars?'),
    ('Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.', 'Janet sells sixteen minus three minus four equals nine duck eggs a day.'),
    ('It takes 2/2=<<2/2=1>>1 bolt of white fiber', 'It takes two divided by two equals one bolt of white fiber'),
    ('#### 18', 'The answer is eighteen'),
    ('Charlie has 54 − 37 = 17 stickers left.', 'Charlie has fifty four minus thirty seven equals seventeen stickers left.'),
    ('This is 12/20 x 100% = 60% of the entire students.', 'This is twelve twentieths times one hundred percent equals sixty percent of the entire students.'),
    ('A bond yielding 5% interest', 'A bond yielding five percent interest'),
    ('58% of students liked the color blue, 45% preferred green', 'fifty eight percent of students liked the color blue, forty five percent preferred green'),
    ('growing at a rate of 3-to-5 percent each year', 'growing at a rate of three to five percent each year'),
    ('The terms were (2/10), (n/30).', 'The terms were two ten, net thirty.'),
    ('$\\frac{1}{2}$ of the pie', 'one half of the pie'),
    ('a $\\frac{3}{4}$ share', 'a three quarters share'),
    ('At 9 GHz the inside dimensions', 'At nine gigahertz the inside dimensions'),
    ('a railway bridge 49 ft high', 'a railway bridge forty nine feet high'),
    ('an initial speed of 10 m/s from a bridge', 'an initial speed of ten meters per second from a bridge'),
    ('the water 80 m below the bridge', 'the water eighty meters below the bridge'),
    ('55 mph', 'fifty five miles per hour'),
    ('0.001 mol of NaOH', 'zero point zero zero one moles of NaOH'),
    ('is added to 100 ml. of a solution', 'is added to one hundred milliliters of a solution'),
    ('that is 0.5 M acetic acid', 'that is zero point five molar acetic acid'),
    ('the resistance of one conductor is 2Ω', 'the resistance of one conductor is two ohms'),
    ('1Ω', 'one ohm'),
    ('spontaneous solidification for copper is 1,120°K', 'spontaneous solidification for copper is one thousand one hundred and twenty kelvin'),
    ('- 470 cal/mole', 'minus four hundred and seventy calories per mole'),
    ('82.1 g mole^-1', 'eighty two point one grams per mole'),
    ('a vertical area of 125 ft^2', 'a vertical area of one hundred and twenty five square feet'),
    ('the angular speed is 0.6 rev/s', 'the angular speed is zero point six rev per second'),
    ('from ice at - 10°C to liquid water at + 15°C', 'from ice at minus ten degrees Celsius to liquid water at plus fifteen degrees Celsius'),
    ('located 10 km from Blagoveshchensk', 'located ten kilometers from Blagoveshchensk'),
    ('2,500 sq. ft.', 'two thousand five hundred square feet'),
    ('a force of 6.0 N causes a displacement of 0.030 m', 'a force of six newtons causes a displacement of zero point zero three meters'),
    ('the screening length $1 / \\kappa$', 'the screening length one over kappa'),
    ('at $298 \\mathrm{~K}$', 'at two hundred and ninety eight kelvin'),
    ('a solution of $\\mathrm{K}_3 \\mathrm{PO}_4$', 'a solution of K three P O four'),
    ('initially at $25^{\\circ} \\mathrm{C}$', 'initially at twenty five degrees Celsius'),
    ('a system consisting of $2.0 \\mathrm{~mol}$', 'a system consisting of two moles'),
    ('a decrease in output from \\[Y_1\\] to \\[Y_2\\]', 'a decrease in output from Y one to Y two'),
    ('$\\sqrt{2}$', 'the square root of two'),
    ('$\\alpha$ particles', 'alpha particles'),
    ('\\hat{y}_t = \\hat{\\alpha} + \\hat{\\beta}x_t', 'y hat sub t equals alpha hat plus beta hat x sub t'),
    ('The equation ΔH = ΔU + PΔV is applicable', 'The equation delta H equals delta U plus P delta V is applicable'),
    ('Θ(n log n)', 'theta of n log n'),
    ('x+y = 4z, x*y = 4z^2, express x-y in z', 'x plus y equals four z, x times y equals four z squared, express x minus y in z'),
    ('How many integers are in the solution of the inequality |x + 5| < 10?', 'How many integers are in the solution of the inequality the absolute value of x plus five less than ten?'),
    ('CaCO₃ + 2 HCl → CaCl₂ + CO₂ + H₂O', 'Ca C O three plus two HCl to Ca Cl two plus C O two plus H two O'),
    ('(L • H) ≡ I', 'L and H is equivalent to I'),
    ('When 30! is computed, it ends in 7 zeros.', 'When thirty factorial is computed, it ends in seven zeros.'),
    ('the 15th typhoon of 2014', 'the fifteenth typhoon of twenty fourteen'),
    ('formed on September 12 and made landfall', 'formed on September twelfth and made landfall'),
    ('at 2:00 on the 14th.', "at two o'clock on the fourteenth."),
    ('In 776 BC, ancient Greece held the first athletic competition.', 'In seven hundred and seventy six B C, ancient Greece held the first athletic competition.'),
    ('between 1991 and 1996', 'between nineteen ninety one and nineteen ninety six'),
    ('Since the 21st century,', 'Since the twenty first century,'),
    ('① lack a pragmatic style ② lack the spirit', 'one, lack a pragmatic style, two, lack the spirit'),
    ('A 2-month-old female is brought to the office', 'A two month old female is brought to the office'),
    ('the reaction N_2O_4 (g) \\rightleftarrows 2NO_2 (g)', 'the reaction N two O four g is in equilibrium with two N O two g'),
    ('a solution of 13C-labelled methyl radical (13CH3•)', 'a solution of thirteen C labelled methyl radical thirteen C H three dot'),
    ('the K_diss of acetic acid is 1.8 × 10^-5.', 'the K diss of acetic acid is one point eight times ten to the minus five.'),
    ('purchased on March 10, with a$155 premium', 'purchased on March tenth, with a one hundred and fifty five dollar premium'),
    ('in the past week (as of 2013)?', 'in the past week as of twenty thirteen?'),
    ('because some things (e.g., long-term torture) are worse than death.', 'because some things, for example, long term torture, are worse than death.'),
    ('[1, 5, 4, 6]', 'one, five, four, six'),
    ('The symmetric group $S_n$ has $n!$ elements', 'The symmetric group S sub n has n factorial elements'),
    ('Let V be the set of all real polynomials p(x).', 'Let V be the set of all real polynomials p of x.'),
    ('1) Guyana 2) Ecuador 3) Colombia', 'one, Guyana, two, Ecuador, three, Colombia'),
    ('a p-value of 0.08', 'a p value of zero point zero eight'),
    ('the 2023 Czech presidential election', 'the twenty twenty three Czech presidential election'),
]


@pytest.mark.parametrize("display,spoken", CASES + FIXTURE_CASES)
def test_cases(display, spoken):
    assert to_spoken(display) == spoken


def test_enough_fixture_cases():
    assert len(FIXTURE_CASES) >= 60


@pytest.mark.parametrize("display", [c[0] for c in CASES + FIXTURE_CASES])
def test_no_symbols_left(display):
    spoken = to_spoken(display)
    assert not re.search(r"[0-9$\\]|<<|####", spoken)
    assert is_speakable(spoken)


@pytest.mark.parametrize("num,den,words", [
    (1, 2, "one half"), (3, 4, "three quarters"), (2, 3, "two thirds"), (5, 8, "five eighths"),
    (1, 100, "one hundredth"), (24, 2, "twenty four divided by two"), (3, 0, "three over zero"),
])
def test_fractions(num, den, words):
    assert say_fraction(num, den) == words


def test_units_need_a_number_and_no_word_after_in():
    assert to_spoken("5 in the box") == "five in the box"
    assert to_spoken("a 2 in. pipe") == "a two inch pipe"
    assert to_spoken("Line 3 to b") == "Line three to b"


def test_unknown_symbols_are_dropped_not_kept():
    spoken = to_spoken("Weird ☃ symbol \\unknown{x} and $")
    assert not UNSPEAKABLE.search(spoken) and "symbol" in spoken


def test_spoken_words_strip_punctuation():
    assert spoken_words("It's A, the Sherman Act. 'Quoted'") == ["It's", "A", "the", "Sherman", "Act", "Quoted"]

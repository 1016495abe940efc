"""The normaliser's rules for numbers that a person would read differently from a calculator: one
category per rule, each with real rows of the fixtures (tests/data/sources: GSM8K test, MMLU-Pro) or
realistic sentences in their style. Display text -> what the voice says."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kame_data.text import to_spoken
from kame_data.text.units import _AMBIGUOUS_UNITS, _UNITS

RULES = {
    # a four-digit number is a year only in a year's company; a count stays a count
    "years": [
        ("So it comes to 1240 trees.", "So it comes to one thousand two hundred and forty trees."),
        ("They filed a total of 1907 reports.", "They filed a total of one thousand nine hundred and seven reports."),
        ("by a distance of 1200-1000=200 feet.",  # GSM8K test row 41
         "by a distance of one thousand two hundred minus one thousand equals two hundred feet."),
        ("The tree will be as tall in 1200 years.", "The tree will be as tall in one thousand two hundred years."),
        ("Which agreement of 1648 brought the Thirty Years' War to an end?",  # hssbench_own
         "Which agreement of sixteen forty eight brought the Thirty Years War to an end?"),
        ("the number of 1-year-old children vaccinated in 2017 exceeds 80%",  # MMLU-Pro validation
         "the number of one year old children vaccinated in twenty seventeen exceeds eighty percent"),
        ("Sales grew from 2007 to 2010.", "Sales grew from two thousand and seven to two thousand and ten."),
        ("between 2008 and 2012", "between two thousand and eight and two thousand and twelve"),
        ("the 15th typhoon of 2014", "the fifteenth typhoon of twenty fourteen"),
    ],
    # an en dash between numbers in a sum is a minus, not a range
    "dash_minus": [
        ("Therefore, the team won 22 – 7 = 15 games.",  # GSM8K test row 84
         "Therefore, the team won twenty two minus seven equals fifteen games."),
        ("This means there are 1000 – 250 = 750 pieces remaining.",  # GSM8K test row 104
         "This means there are one thousand minus two hundred and fifty equals seven hundred and fifty pieces "
         "remaining."),
        ("And we subtract 4 from each side, 3x +4 - 4 = 28 – 4.",  # GSM8K test row 167
         "And we subtract four from each side, three x plus four minus four equals twenty eight minus four."),
        ("She paid $22 – $7 = $15 less.", "She paid twenty two dollars minus seven dollars equals fifteen dollars less."),
        ("We have 12n = 22 - 7m and", "We have twelve n equals twenty two minus seven m and"),  # MMLU-Pro validation
        ("the war of 1914–1918", "the war of nineteen fourteen to nineteen eighteen"),  # a range stays a range
        ("Read pages 20–25.", "Read pages twenty to twenty five."),
    ],
    "mixed_numbers": [
        ("After Friday, he had 3 1/2 - 2 = 1 1/2 hours of TV left.",  # GSM8K test row 107
         "After Friday, he had three and a half minus two equals one and a half hours of TV left."),
        ("Thus, W = 1 1/2 / 1/2 = 3 episodes.", "Thus, W equals one and a half divided by one half equals three episodes."),
        ("a shaft 1(1/2) in. in diameter",  # MMLU-Pro test row 290
         "a shaft one and a half inches in diameter"),
        ("She ran 2 1/4 miles and then 1 3/4 miles.", "She ran two and a quarter miles and then one and three quarters miles."),
        ("three 1/4 cups", "three and a quarter cups"),
    ],
    "ratios": [
        ("Darrell and Allen's ages are in the ratio of 7:11.",  # GSM8K test row 30
         "Darrell and Allen's ages are in the ratio of seven to eleven."),
        ("cups of water in the ratio of 7:13.", "cups of water in the ratio of seven to thirteen."),  # row 116
        ("The data fits a 9:3:3:1 ratio.", "The data fits a nine to three to three to one ratio."),  # MMLU-Pro
        ("other than a 50:50 ratio", "other than a fifty to fifty ratio"),
        ("Mix sand and cement 3:1.", "Mix sand and cement three to one."),
    ],
    "times": [
        ("The meeting starts at 16:00.", "The meeting starts at four P M."),
        ("The shop opens at 9:00 and closes at 17:30.", "The shop opens at nine o'clock and closes at five thirty P M."),
        ("She works from 1:00 PM - 6:00 PM every day.", "She works from one P M to six P M every day."),
        ("after burning from 1:00 PM to 5:00 PM?",  # GSM8K test row 23
         "after burning from one P M to five P M?"),
        ("The shift runs 9:00-17:00.", "The shift runs nine A M to five P M."),
        ("The train leaves at 7:05 pm.", "The train leaves at seven oh five P M."),
        ("He wakes up at 6am.", "He wakes up at six A M."),
        ("at 2:00 on the 14th.", "at two o'clock on the fourteenth."),
    ],
    "implicit_multiplication": [
        ("Workers:4(100)=400 worker bees", "Workers: four times one hundred equals four hundred worker bees"),  # row 141
        ("Scottish Unicorns:27(1/3)=9", "Scottish Unicorns: twenty seven times one third equals nine"),  # row 136
        ("Female:9(2/3)=6 unicorns", "Female: nine times two thirds equals six unicorns"),
        ("(3)(4)=12", "three times four equals twelve"),
        ("Workers:2(2x)=4x", "Workers: two times two x equals four x"),
    ],
    # a slash between a quantity and a unit is "per"; between quantities it is a division
    "slash": [
        ("the trains covered 2 trains * 80 miles/train = 160 miles",  # GSM8K test row 16
         "the trains covered two trains times eighty miles per train equals one hundred and sixty miles"),
        ("Tommy raised 43 brownies x $3/brownie = $129",  # row 72
         "Tommy raised forty three brownies x three dollars per brownie equals one hundred and twenty nine dollars"),
        ("Steve has to travel 3 miles * (5280 feet/1 mile) = 15840 feet",  # row 150
         "Steve has to travel three miles times five thousand two hundred and eighty feet per mile equals fifteen "
         "thousand eight hundred and forty feet"),
        ("Then divide: 80 GB / 2 GB/minute = 40 minutes",  # row 7
         "Then divide: eighty gigabytes divided by two gigabytes per minute equals forty minutes"),
        ("each serving has 300g/5 = 60 grams",  # row 43
         "each serving has three hundred grams divided by five equals sixty grams"),
        ("Therefore, Marie ordered $17/$8.50 = 2 boxes of pizza.",  # row 25
         "Therefore, Marie ordered seventeen dollars divided by eight dollars and fifty cents equals two boxes of "
         "pizza."),
        ("She earns $30/$15 per hour.", "She earns thirty dollars divided by fifteen dollars per hour."),
        ("a $7.00 delivery/tip fee", "a seven dollar delivery or tip fee"),  # words: "or"
        ("an average speed in km/h", "an average speed in kilometers per hour"),
    ],
    # the same fraction is read the same way in a sum and in a sentence
    "fractions": [
        ("Out of the 9 liters, 9 x 2/3 = 6 liters are water.",  # row 20
         "Out of the nine liters, nine times two thirds equals six liters are water."),
        ("His friend James slept only 2/3 of what Harry slept.",  # row 96
         "His friend James slept only two thirds of what Harry slept."),
        ("If 3/4 of the building is occupied, 3/4 * 120 units = 90 units.",  # row 49
         "If three quarters of the building is occupied, three quarters times one hundred and twenty units equals "
         "ninety units."),
        ("Half of 24 is 24/2=12.", "Half of twenty four is twenty four divided by two equals twelve."),
        ("The discount price is 60/100 * 5 = $3.",  # row 5
         "The discount price is sixty over one hundred times five equals three dollars."),
    ],
    # a number between dollar signs in a formula-laden question is math, never money
    "latex_not_money": [
        (r"A point charge of $1.3$$10^7 \mathrm{C}$ is placed at the origin.",
         "A point charge of one point three times ten to the seven coulombs is placed at the origin."),
        ("The temperature falls to $-5$ °C overnight.", "The temperature falls to minus five degrees Celsius overnight."),
        (r"A sample of $2.5$ mol of gas at $300 \mathrm{~K}$ expands.",
         "A sample of two point five moles of gas at three hundred kelvin expands."),
        (r"The field is $4.0$ T and $\theta = 30^{\circ}$.", "The field is four tesla and theta equals thirty degrees."),
        ("The mass is $5$ kg and the velocity is $-2$ m/s.",
         "The mass is five kilograms and the velocity is minus two meters per second."),
        ("a total of $6 + $8 + $20 = $34",  # GSM8K money stays money
         "a total of six dollars plus eight dollars plus twenty dollars equals thirty four dollars"),
    ],
    "units_and_symbols": [
        ("The X-ray wavelength is 1.54 Å.", "The X ray wavelength is one point five four angstroms."),
        ("Bond lengths are measured in Å.", "Bond lengths are measured in angstroms."),
        ("The cell is 10 µm wide.", "The cell is ten micrometers wide."),  # the micro sign, not mu
        ("Temperatures in °C are converted to °F.", "Temperatures in degrees Celsius are converted to degrees Fahrenheit."),
        ("Convert 5 m/s to km/h.", "Convert five meters per second to kilometers per hour."),
        ("The enthalpy is given in kJ/mol.", "The enthalpy is given in kilojoules per mole."),
        ("initially at $25^{\\circ} \\mathrm{C}$", "initially at twenty five degrees Celsius"),
        ("the tension in the string is mg", "the tension in the string is mg"),  # m g, a product, not milligrams
        ("such that 7m + 12n = 22", "such that seven m plus twelve n equals twenty two"),  # m, a variable
        # engineering units of MMLU-Pro rows (11375, 11850 and their kind)
        ("a pressure of 1.5 MPa and", "a pressure of one point five megapascals and"),
        ("(a) 75.88mH, (b) 7.588 Henrys", "a seventy five point eight eight millihenries, b seven point five eight eight Henrys"),
        ("The shaft turns at 1200 rpm.", "The shaft turns at one thousand two hundred revolutions per minute."),
        ("A 10 hp motor runs on 20 cc of fuel.", "A ten horsepower motor runs on twenty cubic centimeters of fuel."),
    ],
    # credit terms as accountants say them; a slash between other numbers stays what it was
    "credit_terms": [
        ("The terms were (2/10), (n/30). If Paul paid",  # MMLU-Pro test, business
         "The terms were two ten, net thirty. If Paul paid"),
        ("discount terms (3/10), (n/30) R.O.G. If", "discount terms three ten, net thirty R O G. If"),
        ("on terms of n/60.", "on terms of net sixty."),
        ("Terms 1/15, n/60 apply", "Terms one fifteen, net sixty apply"),
        ("the ratio 3/4, n/2", "the ratio three quarters, n divided by two"),
        ("n/2 pairs", "n over two pairs"),
        # an en dash glued to a number with no number before it is a minus sign
        ("What is the slope of the line that passes through the points (5, 4) and (–2, 3)?",  # MMLU-Pro test, math
         "What is the slope of the line that passes through the points five comma four and minus two comma three?"),
        ("Solve for x when x = –3 and temperatures of –10°C.",
         "Solve for x when x equals minus three and temperatures of minus ten degrees Celsius."),
    ],
    # LaTeX unit macros and Greek letters are said, not dropped
    "latex_units": [
        ("If a beam of plane-polarized light of wavelength 5461 \\AA is incident normally",  # MMLU-Pro test, physics
         "If a beam of plane polarized light of wavelength five thousand four hundred and sixty one angstroms is "
         "incident normally"),
        ("light of wavelength $\\lambda = 500$ nm", "light of wavelength lambda equals five hundred nanometers"),
        ("a 5 $\\mu$m film at 25 $^\\circ$C", "a five micrometer film at twenty five degrees Celsius"),
        ("the $\\Lambda$ baryon and the ά vowel", "the lambda baryon and the alpha vowel"),
    ],
    # numbers joined by 'x' in front of a noun are a size, read 'by'; after a verb or before '=', a product
    "sizes": [
        ("She has leftover ten 2 x 4 x 10 boards that cost $10 each.",  # GSM8K test row
         "She has leftover ten two by four by ten boards that cost ten dollars each."),
        ("She bought the 2 x 4s for $100", "She bought the two by fours for one hundred dollars"),  # its answer
        ("A is any 20 × 20 array.", "A is any twenty by twenty array."),  # MMLU-Pro test, computer science
        ("She earns 15 x 3 dollars, and the product of 3 x 4 is 12.",
         "She earns fifteen times three dollars, and the product of three times four is twelve."),
    ],
    # a number with a glued 's' is a plural, an orbital or a variable where its neighbours say so, else seconds
    "glued_s": [
        ("She rolled two 6s, in his 40s, counting by 5s; it takes 5s to fall.",
         "She rolled two sixes, in his forties, counting by fives; it takes five seconds to fall."),
        ("the 2s and 2p orbitals of [Ar] 4s^2 3d^10, and 1s^2 2s^2 2p^6",
         "the two s and two p orbitals of Ar four s two three d ten, and one s two two s two two p six"),
        ("Evaluate f(t) if F(s) = [(3s^2 + 17s + 47) / {(s + 2)(s^2 + 4s + 29)}]",  # MMLU-Pro test, engineering
         "Evaluate f of t if F of s equals three s squared plus seventeen s plus forty seven over s plus two times s "
         "squared plus four s plus twenty nine"),
    ],
    # an area or a volume of a length unit is 'square' / 'cubic' (not in a sum: '4m^2 + 3m' has a variable m)
    "areas": [
        ("a vertical area of 125 ft^2 at a distance of 100 ft.",  # MMLU-Pro test, engineering
         "a vertical area of one hundred and twenty five square feet at a distance of one hundred feet."),
        ("a 2 m^3 tank holds 20 cm³ of oil", "a two cubic meter tank holds twenty cubic centimeters of oil"),
        ("g = 9.8 m/s^2 and 4m^2 + 3m = 5", "g equals nine point eight meters per second squared and four m squared "
                                            "plus three m equals five"),
    ],
    # a unit's name is one word, and a number past 12 before 'pm' is a length, not a time
    "unit_words": [
        ("a 2 kV line of 5 mmol and 3 GW", "a two kilovolt line of five millimoles and three gigawatts"),
        ("a bond length of 74 pm, at 3 pm", "a bond length of seventy four picometers, at three P M"),
        ("It draws 20 mA at 5 pm.", "It draws twenty milliamperes at five P M."),
    ],
    # a point is read with "comma", so that a list of points keeps its pairs
    "points": [
        ("The vertices of a triangle are at points (0, 0), (-1, 1), and (3, 3).",  # MT-Bench question 111
         "The vertices of a triangle are at points zero comma zero, minus one comma one, and three comma three."),
        ("the point (1, 2.5, -3)", "the point one comma two point five comma minus three"),
        ("It costs (1,000) dollars, not (2/10), (n/30).", "It costs one thousand dollars, not two ten, net thirty."),
    ],
    # operators a sum needs: a minus after a power, '<=' and '>=', an ion's charge
    "operators": [
        ("12 IF X1 <= 0 then 14 13 LET X1 = -X1",  # MMLU-Pro test option, computer science
         "twelve IF X one less than or equal to zero then fourteen thirteen LET X one equals minus X one"),
        ("LET X1 = X^2 - Y^2 and x^4 - y^4", "LET X one equals X squared minus Y squared and x to the four minus y to the four"),
        ("[NO2-] > [HNO2]", "N O two minus greater than H N O two"),  # MMLU-Pro test option, chemistry
        ("x^2 - y^2 = (x-y)(x+y), but statement (a)(ii)",  # two bracketed sums side by side multiply
         "x squared minus y squared equals x minus y times x plus y, but statement a ii"),
        ("SO4^2- and Fe^{3+} ions, but K_a = 10^-5",
         "S O four two minus and Fe three plus ions, but K a equals ten to the minus five"),
    ],
    # angle-bracket tuples are edges or vectors, never 'less than ... greater than'
    "tuples": [
        ("Let a undirected graph G with edges E = {<0,1>,<4,1>,<2,0>}, which <A,B> represent Node A is connected",
         # MMLU-Pro test, computer science
         "Let a undirected graph G with edges E equals zero one, four one, two zero, which A B represent Node A is "
         "connected"),
        ("the vector <1, -2, 3>", "the vector one, minus two, three"),
        ("if x<1, y>2 and a < 1, b > 2", "if x less than one, y greater than two and a less than one, b greater than two"),
    ],
    # a measure restated in brackets in other units is read with 'or', not run together
    "equivalents": [
        ("A vertical wall 2.0 ft. (0.610 m) high has a surface temperatureof 500°F(523.3 K).",  # MMLU-Pro test
         "A vertical wall two feet, or zero point six one meters, high has a surface temperature of five hundred "
         "degrees Fahrenheit, or five hundred and twenty three point three kelvin."),
        ("It is in contact with air at 120°F(322.2 K). Determine",  # the same row
         "It is in contact with air at one hundred and twenty degrees Fahrenheit, or three hundred and twenty two "
         "point two kelvin. Determine"),
        ("a pipe 2 in. (5.08 cm) in diameter", "a pipe two inches, or five point zero eight centimeters, in diameter"),
    ],
    # a measure in front of its noun is singular, as a person reads it
    "attributive": [
        ("Carla is downloading a 200 GB file.",  # GSM8K test row
         "Carla is downloading a two hundred gigabyte file."),
        ("she wants to add a $5.00 tip.", "she wants to add a five dollar tip."),  # GSM8K test row
        ("posted a $60 billion revenue and a $6 billion profit",  # MMLU-Pro test, business
         "posted a sixty billion dollar revenue and a six billion dollar profit"),
        ("He ran a 5-km race in a 60 km/h wind.", "He ran a five kilometer race in a sixty kilometer per hour wind."),
        ("It weighs 5 kg; the 5 kg of rice cost $12.",  # no article: the plural stays
         "It weighs five kilograms; the five kilograms of rice cost twelve dollars."),
        ("The room measures 3 m × 4 m.", "The room measures three meters by four meters."),
    ],
    # "No." is the number sign only before a numeral; as an answer it is the word no
    "number_sign": [
        ("I'd go with F, No.", "I'd go with F, No."),  # MMLU-Pro test 7380: the option "No" (answer F)
        ("It is in Box No. 12.", "It is in Box number twelve."),
        ("See No.3 and No. 4.", "See number three and number four."),
        ("No. Not at all.", "No. Not at all."),
    ],
}
CASES = [(rule, display, spoken) for rule, cases in RULES.items() for display, spoken in cases]


@pytest.mark.parametrize("rule,display,spoken", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_rule(rule, display, spoken):
    said = to_spoken(display)
    assert said == spoken
    assert not re.search(r"[0-9$\\]", said)


def test_every_rule_has_three_cases():
    assert all(len(cases) >= 3 for cases in RULES.values())


# 'pm' after 1 to 12 is a time ('at 2 pm'), a length only after other numbers ('74 pm'): not plain
_PLAIN_UNITS = sorted(u for u, (one, many) in _UNITS.items()
                      if one != many and u not in _AMBIGUOUS_UNITS and "/" not in u and u != "pm")


@settings(max_examples=200, derandomize=True, deadline=None, database=None)
@given(st.sampled_from(_PLAIN_UNITS), st.integers(min_value=2, max_value=10**6), st.booleans())
def test_a_measure_before_its_noun_is_singular(unit, n, hyphen):
    """'a 200 GB file' says the unit's singular before the noun, whatever the unit and number; with no
    article ('It is 200 GB.') the plural."""
    one, many = _UNITS[unit]
    joined = f"{n}-{unit}" if hyphen else f"{n} {unit}"
    assert to_spoken(f"She bought a {joined} box today.").endswith(f" {one} box today.")
    assert to_spoken(f"It is {n} {unit}.").endswith(f" {many}.")
    assert to_spoken(f"She bought a ${n} hat.").endswith(" dollar hat.")

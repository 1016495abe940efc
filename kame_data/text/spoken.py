"""Display text -> spoken text: the fixed order of the normaliser's passes.

Benchmark text is written to be read, not heard: `$4.95`, `24/2=12`, `$\\frac{1}{2}$`, `25°C`,
`CO2`, `(∃x)`, `totransport`. `to_spoken` rewrites it the way a person would say it (numbers through
num2words), in a fixed order of passes: each pass handles one kind of notation and leaves plain
words for the next. Whatever symbol survives every pass is dropped, so the result is spoken
text (`unspoken`, kame_data/text/tokens.py): letters, single spaces and the pauses , . ; : ? !
with apostrophes inside words; never a digit, `$`, `\\`, `<<` or `####`. Every text has a
spoken form (possibly empty): no input makes a pass raise (tests/text/test_text_totality.py,
benchmarks/fuzz_text.py).
"""

from __future__ import annotations

from functools import lru_cache

from kame_data.text.compounds import run_together
from kame_data.text.dates import dates_and_times
from kame_data.text.latex import math_spans, powers
from kame_data.text.numbers import arithmetic, numerals
from kame_data.text.prepare import (abbreviations, asides, clean, credit_terms, glosses, gsm8k_notes,
                                    products_and_rates, signs)
from kame_data.text.roman import roman_numerals
from kame_data.text.symbols import chemistry, functions, symbols
from kame_data.text.tokens import tidy
from kame_data.text.units import currency, dimensions, equivalents, units

# Bump when a pass changes what some text is said as: the script step's identity carries it, so
# cached dialogues are rebuilt (2: words run together are split, kame_data/text/compounds.py;
# 3: dotted initialisms said letter by letter, "U.S.A." was "U SA."; 4: a sentence's end is not followed
# by a comma, "ancestors., Alfred" was read with both, a bracketed aside of words is said between
# commas, and engineering units are read: "1.5 MPa", "10 mH", "1200 rpm"; 5: an acronym in brackets after
# the words it stands for is said as a gloss, "the European Union, or EU,"; 6: an oxidation state is a
# number, "iron(III) chloride" is "iron three chloride"; 7: Roman numerals whose context makes them numbers,
# "World War two", "Louis the fourteenth", "DSM three", kame_data/text/roman.py; 8: statement labels,
# "two: Groups are"; 9: a lone I after a regnal name only before a stop, "of" or "and"; 10: credit terms,
# "(2/10), (n/30)" is "two ten, net thirty"; 11: a measure in front of its noun is singular, "a two
# hundred gigabyte file", "a five dollar tip", dimensions are read "by", "three meters by four meters",
# and an en dash glued to a number with no number before it is its minus sign, "(–2, 3)"; LaTeX's
# \lambda, \AA, \mu before a unit and $^\circ$C are said, no longer dropped or split; a measure restated in
# brackets is read with "or", "two feet, or zero point six one meters,"; a graph's edges "<0,1>" are
# "zero one", not "less than zero, one greater than"; a minus after a power, "x squared minus y squared",
# and before a letter after "=", "<=" and ">=", and an ion's charge, "S O four two minus", are said; a
# point in brackets is read with "comma", "zero comma zero, minus one comma one"; a size before its noun
# is read "by", "ten two by four by ten boards", "the two by fours"; a glued "s" is a plural, "two sixes",
# "his forties", an orbital, "the two s orbital", "one s two two s two", or a variable, "three s squared
# plus seventeen s", where its neighbours say so, else seconds; a unit with an SI prefix is one word,
# "kilovolts", not "kilo volts", and "74 pm" is seventy four picometers, not a time; an area or volume of a
# length unit is "square feet", "cubic centimeters"; two bracketed sums side by side multiply, "(x-y)(x+y)").
# 12: "No." is "number" only before a numeral ("It's F, No." said "number" and lost MMLU-Pro 7380's answer).
# 13: signs said or the turn refused (text/inventory.py): a spaced or bracketed minus, '-sqrt(34)', 'J mol-1 K-1';
# a slash 'per' by a unit, 'or' between words, else 'over'; '~' and '·' in logic are 'not' and 'and'; a '$' pair
# opening on a letter is LaTeX, never dollars; a charge '^+', '^+2', a star '^*', the angstrom 'A^°'; glued LaTeX
# commands ('\\DeltaE'), '\\ding' bullets, '\\rule' blanks; mojibake mended (ftfy); function words glued to a word;
# a citation's year said as a year; '80 C' by a boiling point is Celsius.
# 14: a multiple-choice answer key keeps option texts of up to 40 words (script/template.py `answer_key`), so a
# round trip that misses the letter ("That would be B" heard "would be the") still finds the answer said; a table
# flattened into prose ('$0 $75000') is refused (text/inventory.py `_table_row`).
SPOKEN_VERSION = "14"


@lru_cache(maxsize=8192)
def to_spoken(text: str) -> str:
    """The spoken form of display text: spoken text (no digit, no symbol), for any string.
    Pure, and asked again for the same text by the script's length checks, its verdicts for the
    allocation (sources/allocate.py) and the turn it builds: remembered."""
    text = clean(text)
    text = credit_terms(text)
    text = gsm8k_notes(text)
    text = signs(text)
    text = abbreviations(text)
    text = glosses(text)
    text = equivalents(text)
    text = dimensions(text)
    text = asides(text)
    text = math_spans(text)
    text = powers(text)
    text = products_and_rates(text)
    text = arithmetic(text)
    text = currency(text)
    text = dates_and_times(text)
    text = units(text)
    text = chemistry(text)
    text = roman_numerals(text)
    text = functions(text)
    text = numerals(text)
    text = symbols(text)
    text = run_together(text)
    return tidy(text)

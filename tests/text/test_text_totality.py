"""The normaliser and the template script builder are total: no text and no option list makes them
raise, and what they say is spoken text (kame_data.text.unspoken: letters, single spaces, the
pauses , . ; : ? ! and apostrophes inside words; no digit, no symbol).

Property tests over the generators of tests/text_strategies.py with a fixed seed (the longer run
is benchmarks/fuzz_text.py), then one example of each mistake the generators found.
"""

from __future__ import annotations

import contextlib
import re
import signal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kame_data.records import LETTERS, Dialogue, Reject, SourceItem
from kame_data.script.solution import sentences
from kame_data.script.config import ScriptConfig
from kame_data.script.template import answer_key, script_item
from kame_data.text import is_speakable, say_number, to_spoken, unspoken
from tests.text_strategies import HypothesisChooser, money, quantity, source_items, texts

def fixed(max_examples: int) -> settings:
    """A fixed seed (the same examples every run) and no time limit per example."""
    return settings(max_examples=max_examples, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example])


CONFIGS = (ScriptConfig(), ScriptConfig(mmlu_options="all"), ScriptConfig(mmlu_options="open"),
           ScriptConfig(max_options=40, followup_rate=0.5))


@pytest.mark.parametrize("text, problem", [
    ("It's A, the one: café, 日本! Right? Yes; no.", ""),
    ("five 5", "characters '5'"), ("a $ b", "characters '$'"), ("x² ÷ y", "characters '²÷'"),
    ("a\tb", "characters '\\t'"), (" a", "spacing"), ("a  b", "spacing"), ("'a", "an apostrophe outside a word"),
])
def test_what_spoken_text_is_made_of(text, problem):
    assert unspoken(text) == problem
    assert is_speakable(text) == (not problem)


@pytest.mark.slow  # over five seconds (tests/README.md)
@fixed(1500)
@given(texts())
def test_any_text_is_spoken_without_digits_or_symbols(text):
    spoken = to_spoken(text)
    assert unspoken(spoken) == "", (text, spoken)
    assert not SENTENCE_END_THEN_COMMA.search(spoken), (text, spoken)


SENTENCE_END_THEN_COMMA = re.compile(r"(?:[?!]|[A-Za-z]{2}\.)\s*[,;:]")


def test_an_area_the_unit_pass_leaves_says_its_power():
    """Found by the generator above: a length glued to a number after a run of slashes ('0/0/0m²') is a
    variable there, and its area sign stayed a symbol; now its power is said."""
    spoken = to_spoken("the0km/hthethethethethethethe0/0/0m²")
    assert unspoken(spoken) == "" and spoken.endswith("zero over zero over zero m squared")


@pytest.mark.parametrize("display,spoken", [
    # MMLU-Pro test row 4778 (a quotation, then its author on the next line after a dash)
    ("the fruits of his ancestors.\n—Alfred Crosby, historian", "the fruits of his ancestors. Alfred Crosby, historian"),
    # a list of circled numbers after a sentence (written for kame-data, in HSSBench's style)
    ("Rank them from the lowest value.\n① Peru ② Chile", "Rank them from the lowest value. one, Peru, two, Chile"),
    ('He asked "why?", then left.', "He asked why? then left."),
    # not after an initial or an ellipsis: there the comma is the sentence's own
    ("Samuel S., age 43, says", "Samuel S., age forty three, says"),
    ("there is..., then", "there is..., then"),
])
def test_a_sentence_end_is_not_followed_by_a_comma(display, spoken):
    assert to_spoken(display) == spoken


@pytest.mark.parametrize("display,spoken", [
    # MMLU-Pro test rows 10766 and 7372
    ("printing that letter or the next (with equal probability). Thus", "printing that letter or the next, with equal "
     "probability. Thus"),
    ("An ARMA(p,q) (p, q are integers bigger than zero) model will have", "An ARMA p, q, p, q are integers bigger "
     "than zero, model will have"),
    ("the value (in dollars) of the house", "the value, in dollars, of the house"),
    # one word, numbers or a formula in brackets are not asides
    ("the supply (NSC) curve", "the supply NSC curve"),
    ("the points (5, 4) and (-2, 3)", "the points five comma four and minus two comma three"),
    ("Evaluate f(t) here", "Evaluate f of t here"),
])
def test_a_bracketed_aside_of_words_is_said_between_commas(display, spoken):
    assert to_spoken(display) == spoken


@pytest.mark.parametrize("display,spoken", [
    ("The National Security Council (NSC) met today.", "The National Security Council, or NSC, met today."),
    ("Gross domestic product (GDP) rose 3%.", "Gross domestic product, or GDP, rose three percent."),
    ("true of the European Union (EU)?", "true of the European Union, or EU?"),
    ("the Department of Health and Human Services (HHS), and", "the Department of Health and Human Services, or "
     "HHS, and"),
    ("non-governmental organizations (NGOs) which", "non governmental organizations, or NGOs, which"),
    # not the initials of the words before: a label, a Roman numeral, letters from inside a word
    ("the supply (NSC) curve", "the supply NSC curve"),
    ("deoxyribonucleic acid (DNA) in cells", "deoxyribonucleic acid DNA in cells"),
])
def test_an_acronym_after_the_words_it_stands_for_is_said_as_a_gloss(display, spoken):
    assert to_spoken(display) == spoken


@pytest.mark.parametrize("display,spoken", [
    ("copper(II) sulfate", "copper two sulfate"),
    ("iron (III) chloride", "iron three chloride"),
    ("Fe(III) ions and Co(II)Cl2.", "Fe three ions and Co two Cl two."),
    ("Tin(IV) oxide", "Tin four oxide"),
    # not a state: a bracketed label is read as the number a reader says (text/roman.py); lower case stays
    ("such as (II) and (III)", "such as two and three"),
    ("lead (ii) and tin (iii)", "lead ii and tin iii"),
    ("statement (IV) is true", "statement four is true"),
])
def test_an_oxidation_state_is_read_as_a_number(display, spoken):
    assert to_spoken(display) == spoken


@pytest.mark.parametrize("display,spoken", [
    # real rows of the fixtures (MMLU-Pro test and validation, HSSBench)
    ("changes in international relations after World War II,", "changes in international relations after World War two,"),
    ("dissociative disorders listed in DSM-III.", "dissociative disorders listed in DSM three."),
    ("Suppose Strain I and Strain II are crossed.", "Suppose Strain one and Strain two are crossed."),
    ("No one understood better than Louis XIV the art", "No one understood better than Louis the fourteenth the art"),
    ("Bipolar II disorder", "Bipolar two disorder"),
    ("The privileges and immunities clause of Article IV, Section 2.",
     "The privileges and immunities clause of Article four, Section two."),
    # the kinds around them
    ("Henry VIII and Elizabeth I", "Henry the eighth and Elizabeth the first"),
    ("Pope John Paul II", "Pope John Paul the second"),
    ("a Type I error; type II diabetes; photosystem I", "a Type one error; type two diabetes; photosystem one"),
    ("Statements I and III only", "Statements one and three only"),
    ("I, II, and IV", "one, two, and four"),
    ("II only", "two only"),
    ("Is it A, I only; B, II only; or C, I and III?", "Is it A, one only; B, two only; or C, one and three?"),
    ("True? I. Sets are closed. II. Groups are abelian.", "True? one: Sets are closed. two: Groups are abelian."),
    ("I. Introduction", "I. Introduction"),
    ("Title IX and Chapter XI", "Title nine and Chapter eleven"),
    # the pronoun, acronyms, letters: as written
    ("I think I can, and in this section I argue it.", "I think I can, and in this section I argue it."),
    ("an IV drip and XX chromosomes", "an IV drip and XX chromosomes"),
    ("Charles, I think", "Charles, I think"),
    ("When I met Michael I was ten.", "When I met Michael I was ten."),
    ("Elizabeth I, then Peter I of Russia", "Elizabeth the first, then Peter the first of Russia"),
    ("I only wanted X and V.", "I only wanted X and V."),
    ("voltage (V) across (X)", "voltage V across X"),
    ("or (I) Stayed the same", "or I Stayed the same"),  # MMLU-Pro test 6894: an option's letter
])
def test_a_roman_numeral_is_read_as_a_number_where_its_context_makes_it_one(display, spoken):
    assert to_spoken(display) == spoken


_PRONOUN_SENTENCES = st.lists(st.sampled_from(
    "I think so I said I can I only I and I , but the section class type war case when then Louis we".split()),
    min_size=1, max_size=12)


@fixed(500)
@given(_PRONOUN_SENTENCES)
def test_the_pronoun_i_is_never_read_as_a_number(words):
    """A lone I is a number only after a capitalised counting noun, a term or a regnal name."""
    text = " ".join(words)
    spoken = to_spoken(text)
    if not re.search(r"\b(?:Louis|[A-Z][a-z]+s?)\s+I\b", text) and "war I" not in text:
        assert " one" not in f" {spoken}" and "first" not in spoken, (text, spoken)


@fixed(1000)
@given(st.composite(lambda draw: draw(st.sampled_from((quantity, money)))(HypothesisChooser(draw)))())
def test_signed_fractions_with_units_and_money_are_read(text):
    """The notation that stopped MMLU-Pro's test split: a signed fraction or mixed number with a
    unit or a currency ('-1/2 lbs', '$-3 1/4 million')."""
    spoken = to_spoken(text)
    assert unspoken(spoken) == "" and spoken, (text, spoken)


@fixed(300)
@given(st.sampled_from(("", "-", "+")), st.integers(0, 10**40), st.integers(0, 999), st.integers(1, 999),
       st.sampled_from(("{s}{a}", "{s}{a}/{d}", "{s}{a} {b}/{d}", "{s}{a}.{b}", "{s}.{b}", "{s}{a:,}")))
def test_say_number_reads_every_shape_of_value(sign, a, b, d, shape):
    said = say_number(shape.format(s=sign, a=a, b=b, d=d))
    assert unspoken(said) == "" and said.startswith("minus ") == (sign == "-")


@pytest.mark.slow  # over five seconds (tests/README.md)
@fixed(200)
@given(source_items(), st.integers(0, len(CONFIGS) - 1))
def test_the_script_builder_answers_every_item_with_a_dialogue_or_a_reason(item, k):
    for variant in range(2):
        out = script_item(item, variant, CONFIGS[k], seed=0)
        assert isinstance(out, (Dialogue, Reject))
        if isinstance(out, Reject):
            assert out.reason and out.stage == "script"
        else:
            assert all(is_speakable(t.spoken) and unspoken(t.spoken) == "" for t in out.turns)


# One example of each mistake the generators found.

@pytest.mark.parametrize("display, spoken", [
    # the units pass handed a signed fraction to the reader of decimals (ValueError: int('1/2'))
    ("A. -1/2 lbs", "A. minus one half of a pound"),
    ("-28/79 m solution", "minus twenty eight over seventy nine molal solution"),
    ("at -5 1/2°C", "at minus five and a half degrees Celsius"),
    # a minus sign before a fraction or a percent was dropped, the number read positive
    ("x = -3/4", "x equals minus three quarters"),
    ("(-1/2)y", "minus one half y"),
    ("a fall of -5%", "a fall of minus five percent"),
    ("$-5.50", "minus five dollars and fifty cents"),
    ("5t - 26.6°", "five t minus twenty six point six degrees"),
    # a percent after a mixed number or fraction read its last part only
    ("6 1/2% interest", "six and a half percent interest"),
    # numbers in other scripts, numeric characters NFKC keeps ('௰' is ten), kept as symbols
    ("٣ apples and ௰ pears", "three apples and ten pears"),
    ("x⁻¹", "x to the minus one"),
])
def test_notation_found_by_fuzzing(display, spoken):
    assert to_spoken(display) == spoken


def test_a_digit_run_longer_than_any_number_name_is_read_digit_by_digit():
    """num2words names numbers below 10**306 and Python parses at most 4300 digits: a longer run
    (a hash, an expansion) was an OverflowError or a ValueError."""
    for run in ("7" * 400, "1," * 2000 + "1", "$" + "9" * 5000):
        spoken = to_spoken(f"the code {run} ends")
        assert unspoken(spoken) == "" and spoken.startswith("the code seven seven" if run[0] == "7" else "the code")


def _mc(n_options: int, letter: str, **kw) -> SourceItem:
    options = [f"choice {k}" for k in range(n_options)]
    index = LETTERS.index(letter) if letter in LETTERS and LETTERS.index(letter) < n_options else 0
    return SourceItem(id="mmlu_pro-1", source="mmlu_pro", category="other", question="Which one is it?",
                      options=options, answer=options[index], answer_letter=letter, **kw)


def test_more_options_than_letters_reads_at_most_twenty_six():
    """40 options, `all` read: the answer and the first 25 others, lettered A to Z (the relabelling
    indexed past LETTERS)."""
    d = script_item(_mc(40, "C"), 0, ScriptConfig(mmlu_options="all", max_turn_seconds=200), seed=0)
    assert isinstance(d, Dialogue), d
    user = d.turns[0].text
    assert "Z, choice 25" in user and "choice 26" not in user and d.answer == ["C", "choice two"]
    subset = script_item(_mc(40, "B"), 0, ScriptConfig(max_options=40, max_turn_seconds=200), seed=0)
    assert isinstance(subset, Dialogue) and len(re.findall(r"\bchoice \d+", subset.turns[0].text)) == 26


@pytest.mark.parametrize("letter", ["", "Z", "a", "A,A", "?"])
def test_an_answer_letter_that_names_no_option_is_a_malformed_answer(letter):
    out = script_item(_mc(5, letter), 0, ScriptConfig(), seed=0)
    assert isinstance(out, Reject) and out.reason == "malformed_answer"
    assert answer_key(_mc(5, letter)) == []


def test_a_worked_answer_too_long_to_say_is_refused_not_looped_on():
    """The solution was cut shorter and shorter until the turn fitted, forever when the answer
    alone was too long."""
    item = SourceItem(id="gsm8k-1", source="gsm8k", category="math", question="How far is it?",
                      options=[], answer=" ".join(["far"] * 200), answer_letter="",
                      explanation="It is far. Very far indeed.")
    out = script_item(item, 0, ScriptConfig(), seed=0)
    assert isinstance(out, Reject) and out.reason == "too_long"


@pytest.mark.parametrize("run", [
    "0 apples + 1 apples + 2 apples + 3 apples + ",  # a sum without its '=' (spaces shared out 6^n ways)
    "1/",  # a run of slashes (each pair a fraction or a division)
    "½ + ",  # fractions added, no '=' (the same)
    "1(",  # products in brackets ('1 × (1 × (...': a bracket the term's or the chain's)
])
def test_long_chains_are_read_in_linear_time_not_retried_exponentially(run):
    """Patterns that matched one text in many ways hung on a long list: 40 repeats must take well
    under a second each (they took 2^40 tries and more); the bound is a generous hang guard."""
    text = run * 40
    with _deadline(20):
        spoken = to_spoken(text)
        said = sentences(text)
    assert unspoken(spoken) == "" and isinstance(said, list)


@contextlib.contextmanager
def _deadline(seconds: float):
    """Raise in the test instead of hanging the suite when the code under test does not return."""
    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: exponential backtracking?")
    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

"""Predictions that are replies: the non-reply kinds the stage retries, and the per-level prompt
views of the hint (their size grows with the level)."""

import dataclasses
import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kame_data.llm.base import ChatBackend, ChatRequest
from kame_data.oracle import prompts
from kame_data.oracle.ladder import ladder
from kame_data.oracle.replies import (CONTRADICTS_CLUE, CUT, ECHO, EMPTY, EXAMPLE, IGNORES_CLUE, LOOP, META, SHORT,
                                      classify, clean_prediction, contradicts_clue, ignores_clue, repair_cut)
from kame_data.records import CHANNEL, Word
from tests.loopback_server import reply_for
from tests.steps import run_flat

CONTEXT = ("B: Quick question. The list price of a book is four dollars and ninety five cents. "
           "It sells at a net price of two dollars and ninety five cents. What is the trade discount?")


@pytest.mark.parametrize("text,kind", [
    # answers about the conversation instead of a reply in it
    ("You cannot predict A's next response based on what they said.", META),
    ("responds: I'm glad to help.", META),
    ("The assistant's next response would be about the price.", META),
    ("Based on the clue words, the answer is two dollars.", META),
    # seen on the quickstart at level 0 (SmolLM2-135M): talk about a hint, then a few-shot example's answer
    ("You've already been given a hint. The answer is two dollars.", META),
    ("The answer is eight apples, so that is it.", EXAMPLE),
    # prompts v3, level 0 on quickstart questions: shorter borrowings from one example
    ("I'll just guess. It's eight apples.", EXAMPLE),
    ("The answer is three apples.", EXAMPLE),
    ("Plants take in carbon dioxide from the book.", EXAMPLE),
    ("Three plus five equals eight, so the answer is eight.", EXAMPLE),
    # the start every multiple-choice reply shares with an example ("The answer is B, the Nile") is
    # no copy of it (seen at levels 1 and 2 on MMLU-Pro and HSSBench-style fixture rows)
    ("The answer is B, the Inca. The answer is B, the Inca Empire.", ""),
    ("The answer is B, The Treaty.", ""),
    # the user's question said again
    ("The list price of a book is four dollars and ninety five cents.", ECHO),
    ("", EMPTY),
    ("Two dollars.", SHORT),
    # real replies, including one that names an option the question also reads out
    ("The trade discount is two dollars, the list price minus the net price.", ""),
    ("It's D, two dollars.", ""),
    ("Scientists predict the rain will stop by the evening.", ""),
    # the instruction reworded into the answer (prompts v5, 40 real GSM8K / MMLU-Pro dialogues, levels 0-3)
    ("That would be B, five dollars. I'll just make it a sentence with all of these words.", META),
    ("I'll show you a short sentence. The answer is two.", META),
    ("D. Guess what Assistant says, that's a very common question.", META),
    ("Guess what I would say, I would say: the answer is two dollars.", META),
    ("Guess what, the answer is two dollars.", ""),
    # the sampler caught in a loop (same source): a run of words three times over
    ("She will get the answer to her question, she will get the answer to her question, she will get the "
     "answer to her question.", LOOP),
    ("D, four point four, so the answer is fourteen point four, so the answer is fourteen point four, so the "
     "answer is fourteen point four.", LOOP),
    # an answer said twice is a reply
    ("The discount is two dollars. So the answer is two dollars, the answer is two.", ""),
    # one clause said twice and nothing else is not (replies v10, level 0 of real fixture dialogues)
    ("The answer is no, the answer is no.", LOOP),
    ("You're a game. You're a game.", LOOP),
    ("The answer is twenty thousand. The answer is twenty thousand.", LOOP),
    ("The Chinese New Year. The Chinese New Year is a lunar holiday.", ""),  # the second says more
    # a clause said twice with only framing between (replies v11, v10 predictions of the fixture ladder)
    ("The answer is two, so the answer is two.", LOOP),
    ("The answer is one thousand nine hundred and ninety two, which is one thousand nine hundred and ninety two.",
     LOOP),
    ("The answer is C, Max Weber. The correct answer is C, Max Weber.", LOOP),
    ("She sells nine duck eggs, day, day, she sells nine duck eggs, day. That's the answer.", LOOP),
    ("The answer is ten. So the answer is ten marbles.", ""),  # marbles: the second says more
    ("The answer is B, the Inca. The answer is B, the Inca Empire.", ""),
    ("Yes, yes.", SHORT),
])
def test_classify(text, kind):
    assert classify(clean_prediction(text), CONTEXT) == kind


_WORDS = ("cat", "river", "seven", "green", "market", "bread", "dollars", "engine", "winter", "paper")


@given(st.lists(st.sampled_from(_WORDS), min_size=6, max_size=9, unique=True),
       st.sampled_from(["", "so", "which is", "so the answer is", "the correct answer is"]),
       st.lists(st.sampled_from(("violin", "harbour", "copper")), max_size=2))
def test_a_clause_said_twice_loops_unless_the_rest_says_more(clause, between, more):
    """The v11 rule over any clause of six words or more (its two copies then fill three quarters of the
    reply whatever the framing): said twice with framing between, a LOOP; with a word of substance
    the clause lacks, a reply."""
    from kame_data.oracle.replies import loops

    said = " ".join(clause)
    text = f"{said}, {between} {said} {' '.join(more)}."
    assert loops(text) == (not more)


def test_cut_output_is_detected_and_repaired_to_its_last_sentence():
    text = "The discount is two dollars. You subtract the net price from the list pri"
    assert classify(text, CONTEXT, truncated=True) == CUT
    assert repair_cut(text) == "The discount is two dollars."
    assert classify(repair_cut(text), CONTEXT) == ""
    assert repair_cut("no sentence ends here at al") == ""
    assert classify("The discount is two dollars.", CONTEXT, truncated=True) == ""  # ended cleanly at the limit


def test_a_quoted_option_is_no_echo_when_the_clue_shows_its_words():
    # level 3 on an HSSBench-style fixture row: the clue is the hint's runs of content words
    context = ("B: When did the Berlin Wall fall? Which is it A one thousand nine hundred and sixty one B one thousand"
               " nine hundred and eighty five C one thousand nine hundred and eighty nine")
    reply = "That would be C, one thousand nine hundred and eighty nine."
    shown = prompts.clue("That would be C, one thousand nine hundred and eighty nine.", 3)
    assert classify(reply, context, shown=shown) == ""
    assert classify(reply, context, shown="C, one") == ECHO  # the clue accounts for too little of it
    assert classify("That would be B, one thousand nine hundred and eighty five.", context,
                    shown=shown) == ECHO  # another option read back


def test_a_quoted_option_is_no_echo_when_the_hint_names_it():
    context = "B: Which treaty ended the war? Is it A, the Treaty of Utrecht; B, the Peace of Westphalia of sixteen forty eight"
    reply = "B, the Peace of Westphalia of sixteen forty eight."
    assert classify(reply, context) == ECHO  # at level 0 this is the question read back
    assert classify(reply, context, shown="The answer is B, the Peace of Westphalia of sixteen forty eight.") == ""


def test_clean_prediction_stops_at_the_next_turn_and_strips_labels():
    assert clean_prediction("Assistant: It's B, the Nile.\nUser: thanks") == "It's B, the Nile."
    assert clean_prediction("A: **Sixty** rolls.\n\nInput:\nmore") == "Sixty rolls."
    assert len(clean_prediction(" ".join(["word"] * 50)).split()) == 30
    # a long reply ends where a speaker could stop: its last sentence end, else its last clause break
    long = ("A. Force. The reason is that force is measured by Newton's second law of motion, which is equal to "
            "the mass of an object multiplied by the acceleration of an object in motion")
    assert clean_prediction(long) == "A. Force. The reason is that force is measured by Newton's second law of motion."
    assert clean_prediction("It is B. " + long[10:]) == "It is B. The reason is that force is measured by Newton's second law of motion."
    assert clean_prediction("Assistant says: Sixty rolls.") == "Sixty rolls."
    # an option letter or the article that starts a reply is not a speaker label
    assert clean_prediction("B, the Nile. It runs north.") == "B, the Nile. It runs north."
    assert clean_prediction("A baker makes sixty rolls.") == "A baker makes sixty rolls."
    assert clean_prediction("B the Inca Empire") == "B the Inca Empire"
    # said the way the true reply is said: number words, no symbols
    assert clean_prediction("So the total cost is 12 + 4 = 16 dollars. The answer is 16.") == (
        "So the total cost is twelve plus four equals sixteen dollars. The answer is sixteen.")
    assert clean_prediction("It is 50% off, so $3.") == "It is fifty percent off, so three dollars."
    assert clean_prediction("So that's twelve x four equals forty eight.") == "So that's twelve times four equals forty eight."
    assert clean_prediction("Solve for x in two x plus one.") == "Solve for x in two x plus one."
    assert clean_prediction("Twenty-three plus forty-two is sixty-five.") == "Twenty three plus forty two is sixty five."



def test_the_prompts_own_instruction_is_cut_out_of_a_reply_that_repeats_it():
    """Shown 'Assistant will say: ... market. Say it nearly the same way.', a small model may write
    the instruction after the reply; what is left is the reply (or nothing, which is asked again)."""
    said = "Sure. She makes eighteen dollars every day at the market. Say it nearly the same way."
    assert clean_prediction(said) == "Sure. She makes eighteen dollars every day at the market."
    assert clean_prediction("It's B. User says a short sentence with all of these words. Fine.") == "It's B. Fine."
    assert classify(clean_prediction("No clue yet. Guess what Assistant says."), "B: hi") == "empty"
    # the same words inside a sentence of the reply's own stay
    assert clean_prediction("I will say it nearly the same way as before.") == "I will say it nearly the same way as before."

HINT = "It's B, the Peace of Westphalia. It ended the Thirty Years War in sixteen forty eight."


def test_each_level_shows_more_of_the_hint():
    shown = [prompts.clue(HINT, level) for level in range(5)]
    assert shown[0] == "" and shown[4] == HINT
    words = [set(s.replace(",", "").split()) for s in shown[1:4]]
    assert words[0] < words[1] < words[2]  # levels 1-3: growing sets of the hint's content words
    assert "the" not in words[2] and "Westphalia" in words[0] | words[1]
    assert len(words[0]) <= prompts.MAX_KEYWORDS[1]


def test_requests_share_their_leading_messages_and_extend_one_another():
    words = [Word("B", w, i * 0.3, i * 0.3 + 0.25) for i, w in enumerate("which treaty ended the thirty years war".split())]
    words += [Word("A", w, 3 + i * 0.3, 3.25 + i * 0.3) for i, w in enumerate(HINT.split())]
    steps = [s for s in ladder(words, 0.5, CHANNEL["A"], CHANNEL) if s.level < 5]
    reqs = [prompts.build_request(s, 40, 0.7, 0) for s in steps]
    assert len({r.messages[:-1] for r in reqs}) == 1  # system text and few-shot examples: evaluated once
    for a, b in zip(reqs, reqs[1:]):
        ctx_a, ctx_b = a.messages[-1][1].split("\n\n")[0], b.messages[-1][1].split("\n\n")[0]
        assert ctx_b.startswith(ctx_a)  # each prompt extends the one before: the KV cache is reused
    assert "User: which treaty" in reqs[0].messages[-1][1]
    assert all(HINT not in r.messages[-1][1] for r, s in zip(reqs, steps) if s.level < 4)


def test_levels_three_and_four_start_the_answer_on_the_hint_where_the_backend_takes_a_prefill():
    words = HINT.split()
    starts = [prompts.reply_start(HINT, level) for level in range(5)]
    assert starts[:3] == ["", "", ""]
    assert HINT.startswith(starts[3]) and HINT.startswith(starts[4]) and len(starts[3]) < len(starts[4]) < len(HINT)
    assert len(starts[4].split()) == -(-len(words) // 2)  # the first half of the hint's words, rounded up
    assert prompts.reply_start("D two", 4) == "D" and prompts.reply_start("Yes", 4) == ""  # never the whole hint
    long = " ".join(f"w{i}" for i in range(80))  # a long worked answer: the model still says most of it
    assert len(prompts.reply_start(long, 4).split()) == len(prompts.reply_start(long, 3).split()) == 12
    words_a = [Word("B", w, i * 0.3, i * 0.3 + 0.25) for i, w in enumerate("which treaty ended the war".split())]
    words_a += [Word("A", w, 3 + i * 0.3, 3.25 + i * 0.3) for i, w in enumerate(words)]
    step = dataclasses.replace(ladder(words_a, 0.5, CHANNEL["A"], CHANNEL)[0], level=4)
    plain, filled = prompts.build_request(step, 40, 0.7, 0), prompts.build_request(step, 40, 0.7, 0, prefill=True)
    assert plain.reply_start == "" and filled.reply_start == starts[4] and plain.messages == filled.messages
    # a request without a prefill keys the cache as if the field did not exist, so cached answers stay valid
    assert plain.key("b", "m") != filled.key("b", "m")
    legacy = {"backend": "b", "model": "m", "messages": plain.messages, "max_tokens": 40, "temperature": 0.7, "seed": 0}
    blob = json.dumps(legacy, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert plain.key("b", "m") == hashlib.sha256(blob.encode()).hexdigest()
    assert ChatRequest(messages=plain.messages).reply_start == ""


class Scripted(ChatBackend):
    """A backend whose first answer to each step talks about the conversation, and whose retry
    answers properly, except for one step that only ever echoes the user."""

    name, model = "scripted", "s"

    def __init__(self, echo_context: str):
        self.echo_context, self.seeds = echo_context, []

    def complete(self, requests, on_answer=None):
        from kame_data.llm.base import ChatResult

        out = []
        for r in requests:
            self.seeds.append(r.seed)
            context = r.messages[-1][1].split("\n\n")[0]
            if context == self.echo_context:
                text = context.split(": ", 1)[1]  # the user's words read back
            elif r.seed == 0:
                text = "You cannot predict A's next response."
            else:
                text = reply_for([{"content": r.messages[-1][1]}])  # a reply that uses the clue shown
            out.append(ChatResult(text, 10, len(text.split())))
        return out


def test_stage_retries_non_replies_counts_them_and_keeps_reference_fields():
    from kame_data.oracle.config import OracleConfig
    from kame_data.oracle.stage import OracleStage
    from kame_data.records import Reject, Sample
    from tests.synthetic import synthetic_dialogue

    r = synthetic_dialogue(2, user_words=20)
    steps = ladder(r.words, 0.5, CHANNEL["A"], CHANNEL)
    echo = next(s for s in steps if s.level < 5 and s.total_word_count > 8)
    backend = Scripted(prompts.user_message(echo.conversation_context, 0, "", "A").split("\n\n")[0])
    stage = OracleStage(OracleConfig(retries=2), backend=backend)
    out = run_flat(stage, [r])
    sample = next(o for o in out if isinstance(o, Sample))
    rejects = [o for o in out if isinstance(o, Reject)]
    assert [x.reason for x in rejects] == ["empty_prediction"]
    assert rejects[0].id == f"{r.id}@{echo.timestamp_ms}" and "level" in rejects[0].detail
    kept = [s for s in steps if s.timestamp_ms != echo.timestamp_ms]
    fields = ("timestamp_ms", "conversation_context", "total_word_count", "trigger_word", "recent_words",
              "current_spoken_ratio", "channel", "level")
    # every field but the prediction is the reference ladder's (docs/design.md), the hint included
    assert [tuple(getattr(e, f) for f in fields) + (e.hint,) for e in sample.oracle] == \
           [tuple(getattr(s, f) for f in fields) + (s.hint,) for s in kept]
    assert all(e.prediction.startswith("I think ") for e in sample.oracle if e.level < 5)
    counts = stage.summary()["predictions"]
    simulated = sum(1 for s in steps if s.level < 5)
    assert counts["meta"] == simulated - 1 and counts["echo"] == 3 and counts["dropped_echo"] == 1
    assert counts["ok"] == simulated - 1
    assert sorted(set(backend.seeds)) == [0, 1, 2]


@pytest.mark.parametrize("prediction,shown,ignores", [
    ("The answer is B.", "D", True),  # the option the clue names, contradicted
    ("It's D, two dollars.", "D", False),
    ("No, it's not. The answer is not.", "Sure, Janet sells nine duck eggs a day", True),
    ("She sells nine of them.", "Sure, Janet sells nine duck eggs a day", False),
    ("The answer is the buyers.", "A, buyers", False),
    ("The answer is A.", "A, buyers", False),  # the option letter is a clue word, though "a" is a function word
    ("It is the sellers.", "the", False),  # a clue of function words only asks nothing
    ("Anything at all.", "", False),  # level 0 shows no clue
    ("Un café, s'il vous plaît.", "café", False),  # read as token-F1 reads words, accents kept
])
def test_a_reply_that_says_none_of_the_clue_words_ignores_the_clue(prediction, shown, ignores):
    assert ignores_clue(prediction, shown) is ignores
    assert classify(prediction, CONTEXT, shown) == (IGNORES_CLUE if ignores else "")


def test_a_non_reply_is_named_before_it_is_judged_for_ignoring_the_clue():
    assert classify("You cannot predict what they will say next.", CONTEXT, "D") == META


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=40), st.data())
def test_a_reply_that_says_one_clue_word_never_ignores_the_clue(shown, data):
    from kame_data.oracle.metrics import tokens

    words = [t for t in tokens(shown) if t not in prompts.FUNCTION_WORDS]
    if words:
        said = data.draw(st.sampled_from(words))
        assert not ignores_clue(f"Well, {said} is my answer.", shown)
        assert ignores_clue("Well, that is my answer.", shown) == set(words).isdisjoint({"well", "that", "is", "my", "answer"})


@pytest.mark.parametrize("prediction,shown,contradicts", [
    ("The answer is A, three dollars.", "D two dollars", True),  # another option and another sum
    ("That would be B, two dollars.", "D two dollars", True),  # the sum, but another option
    ("That would be D, two dollars.", "D two dollars", False),
    ("It's A, not D, I'd say two dollars.", "D two dollars", False),  # weighing the options
    ("The discount is fifty five cents, so it is eighty five cents.", "discount, five dollars, price, fifteen dollars", True),
    ("The discount is five dollars, so it is fifteen.", "discount, five dollars, price, fifteen dollars", False),
    ("Half of it is twenty, plus five is twenty five.", "five dollars", False),  # working the sum
    ("It takes one bolt of blue fiber, which is two bolts.", "takes one bolt, white fiber, three bolts", True),
    ("It's the one with the river.", "three bolts, river", False),  # "one" is no number
    ("A baker makes rolls all day.", "B, rolls", False),  # an article, not an option
    ("I think so, the Nile.", "A, Nile", False),  # "I" is no option
    ("A and B.", "A, D", False),  # names A too: letters joined by "and"
    ("It's A or B, the river.", "C, river", True),
    ("Option B is the one.", "D, one", True),  # a letter after the word that announces it
    ("Option D is the one.", "D, one", False),
    ("The answer is the Nile.", "A, Nile", False),  # names no letter, no number
    ("It is twelve.", "", False),  # level 0 shows no clue
])
def test_a_reply_that_answers_otherwise_than_the_clue_contradicts_it(prediction, shown, contradicts):
    assert contradicts_clue(prediction, shown) is contradicts
    assert classify(prediction, CONTEXT, shown) == (CONTRADICTS_CLUE if contradicts else "")


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 10**6), st.integers(2, 10**6), st.sampled_from("ABCDEFGH"), st.sampled_from("ABCDEFGH"))
def test_a_reply_contradicts_the_clue_exactly_when_its_number_or_letter_is_another(n, m, shown_letter, said_letter):
    from kame_data.text import to_spoken

    said_n, said_m = to_spoken(f"{n} dollars"), to_spoken(f"{m} dollars")
    words_n, words_m = said_n.split()[:-1], said_m.split()[:-1]
    contradicts = contradicts_clue(f"Well, the total is {said_m}.", f"total, {n} dollars")  # the clue as written
    k = min(len(words_n), len(words_m))
    if n == m:
        assert not contradicts
    elif words_n[:k] != words_m[:k]:  # one said as the start of the other may be a cut clue: no verdict
        assert contradicts, (said_n, said_m)
    assert contradicts_clue(f"Well, it is {said_letter}, the total.", f"{shown_letter}, total") is \
        (said_letter != shown_letter)


class ClueLate(ChatBackend):
    """Ignores the clue on the first attempt (seed 0) and uses it on the next, except for the steps
    that show the first clue it was asked with: those never use it."""

    name, model = "clue-late", "c"

    def __init__(self):
        self.seeds, self.stubborn = [], None

    def complete(self, requests, on_answer=None):
        from kame_data.llm.base import ChatResult

        out = []
        for r in requests:
            self.seeds.append(r.seed)
            prompt = r.messages[-1][1]
            clued = "Clue: " in prompt or "will say: " in prompt
            if clued and self.stubborn is None:
                self.stubborn = prompt.split("\n\n")[-1]
            stubborn = clued and prompt.split("\n\n")[-1] == self.stubborn
            text = ("Zebras quietly graze on the open plain." if clued and (r.seed == 0 or stubborn)
                    else reply_for([{"content": prompt}]))
            out.append(ChatResult(text, 10, len(text.split())))
        return out


def test_a_reply_that_ignores_the_clue_is_asked_again_and_kept_when_no_attempt_does_better():
    from kame_data.oracle.config import OracleConfig
    from kame_data.oracle.stage import OracleStage
    from kame_data.records import Reject, Sample
    from tests.synthetic import synthetic_dialogue

    r = synthetic_dialogue(3, user_words=20)
    stage = OracleStage(OracleConfig(retries=2), backend=(backend := ClueLate()))
    out = run_flat(stage, [r])
    sample = next(o for o in out if isinstance(o, Sample))
    assert not [o for o in out if isinstance(o, Reject)]  # nothing dropped for a poor reply
    steps = [s for s in ladder(r.words, 0.5, CHANNEL["A"], CHANNEL) if s.level < 5]
    assert len([e for e in sample.oracle if e.level < 5]) == len(steps)
    stubborn = [e for e in sample.oracle if e.prediction == "Zebras quietly graze on the open plain."]
    assert stubborn and all(0 < e.level < 5 for e in stubborn)  # kept after its three attempts
    assert all(not ignores_clue(e.prediction, prompts.clue(e.hint, e.level)) for e in sample.oracle
               if e not in stubborn)
    counts = stage.summary()["predictions"]
    assert counts["kept_ignores_clue"] == len({e.timestamp_ms for e in stubborn})
    assert counts["ignores_clue"] == sum(1 for s in steps if s.level > 0) + 2 * counts["kept_ignores_clue"]
    assert sorted(set(backend.seeds)) == [0, 1, 2]


class Contrary(ChatBackend):
    """On the first attempt (seed 0) at a clue that says numbers, says the clue's other words and a
    number it never shows; otherwise the clue's words as they are (reply_for). `prefill`: declares
    that it starts answers on the hint's words, as the embedded model does."""

    name, model = "contrary", "c"
    WRONG = "zero point zero three"  # no clue says it, nor a number it starts

    def __init__(self, prefill: bool = False, vague: bool = False):
        from kame_data.llm.base import Capabilities

        self.capabilities = Capabilities(prefill=prefill)
        self.vague = vague  # the second attempt says one clue word only: a reply, but less of the clue
        self.seeds: list[int] = []
        self.contrary = {"anchored": 0, "free": 0}  # first answers that say another number

    def complete(self, requests, on_answer=None):
        import re

        from kame_data.llm.base import ChatResult
        from kame_data.oracle.replies import _number_runs
        from kame_data.text import to_spoken
        from kame_data.text.numbers import NUMBER_WORD

        out = []
        for r in requests:
            self.seeds.append(r.seed)
            prompt = r.messages[-1][1]
            text = reply_for([{"content": prompt}])
            shown = re.search(r"(?:Clue|will say): (.+?)(?:\. [A-Z]|$)", prompt, re.M)
            if r.seed == 0 and shown and _number_runs(to_spoken(shown.group(1))):
                words = re.sub(rf"\b{NUMBER_WORD}\b|\d", " ", text.removeprefix("I think ").rstrip("."), flags=re.I)
                text = f"I think {' '.join(words.split())} is {self.WRONG}."
                self.contrary["anchored" if r.reply_start else "free"] += 1
            elif r.seed == 1 and self.vague and shown:
                text = f"Well, {shown.group(1).split()[0].strip(',.')} is the thing to say."
            out.append(ChatResult(text, 10, len(text.split())))
        return out


@pytest.mark.parametrize("prefill", [False, True])
def test_a_reply_that_contradicts_the_clue_is_asked_again_unless_it_starts_on_the_hint(prefill):
    from kame_data.oracle.config import OracleConfig
    from kame_data.oracle.stage import OracleStage
    from kame_data.records import Sample
    from tests.synthetic import fixture_dialogues

    stage = OracleStage(OracleConfig(retries=2), backend=(backend := Contrary(prefill)))
    samples = [o for o in run_flat(stage, fixture_dialogues(3)) if isinstance(o, Sample)]
    wrong = [e for s in samples for e in s.oracle if Contrary.WRONG in e.prediction]
    assert backend.contrary["free"] > 0 and (backend.contrary["anchored"] > 0) is prefill
    assert len(wrong) == backend.contrary["anchored"]  # an answer started on the hint is never asked again
    assert all(prompts.REPLY_START_SHARE.get(e.level) for e in wrong)
    counts = stage.summary()["predictions"]
    assert counts["contradicts_clue"] == backend.contrary["free"]
    assert "kept_contradicts_clue" not in counts  # every one asked again gave a reply
    assert sorted(set(backend.seeds)) == [0, 1]


def test_a_poor_reply_stands_against_a_later_one_that_says_less_of_the_clue():
    from kame_data.oracle.config import OracleConfig
    from kame_data.oracle.stage import OracleStage
    from kame_data.records import Sample
    from tests.synthetic import fixture_dialogues

    stage = OracleStage(OracleConfig(retries=2), backend=(backend := Contrary(vague=True)))
    samples = [o for o in run_flat(stage, fixture_dialogues(3)) if isinstance(o, Sample)]
    predictions = [e.prediction for s in samples for e in s.oracle if 0 < e.level < 5]
    assert backend.contrary["free"] > 0 and not any("is the thing to say" in p for p in predictions)
    assert not any(Contrary.WRONG in p for p in predictions)  # the third attempt says the whole clue
    assert sorted(set(backend.seeds)) == [0, 1, 2]
    counts = stage.summary()["predictions"]
    assert "kept_contradicts_clue" not in counts and counts["said_less_than_kept"] > 0

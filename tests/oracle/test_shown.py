"""The simulator is shown the true reply as written (kame_data/oracle/shown.py), while every field
of the ladder stays the reference's words."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from kame_data.oracle import prompts
from kame_data.oracle.ladder import ladder
from kame_data.oracle.shown import written_forms
from kame_data.records import Turn, Word
from kame_data.text.tokens import spoken_words

CHANNELS = {"A": 0, "B": 1}


def _said(turns: list[Turn], cut: dict[int, int] | None = None, gap: float = 0.3) -> list[Word]:
    """Each turn's words one after another, 0.3 s each (a turn k cut after cut[k] words)."""
    words, t = [], 0.0
    for k, turn in enumerate(turns):
        for w in spoken_words(turn.spoken)[: (cut or {}).get(k)]:
            words.append(Word(turn.speaker, w, t, t + 0.25))
            t += gap
        t += 0.5
    return words


TURNS = [Turn("user", "B", "", "Which quantity is measured in newtons? Would it be A, Force; or B, Power?"),
         Turn("assistant", "A", "", "A. Force. The reason is that a newton is the unit of force."),
         Turn("user", "B", "", "Okay, and what about watts?"),
         Turn("assistant", "A", "", "Watts measure power: one joule per second.")]


def test_the_reply_is_shown_with_its_punctuation_and_the_ladder_keeps_the_words():
    words = _said(TURNS)
    plain = ladder(words, 0.5, 0, CHANNELS)
    shown = ladder(words, 0.5, 0, CHANNELS, written=written_forms(words, TURNS))
    assert [s.true_reply for s in shown] == [s.true_reply for s in plain]
    assert [s.hint for s in shown] == [s.hint for s in plain]
    replies = {s.reply_shown for s in shown}
    assert replies == {"A. Force. The reason is that a newton is the unit of force.",
                       "Watts measure power: one joule per second."}
    step = next(s for s in shown if s.level == 3 and s.channel == 0)
    assert prompts.build_request(step, 40, 0.7, 0, prefill=True).reply_start == "A. Force. The reason"
    request = prompts.build_request(replace(step, level=4), 40, 0.7, 0, prefill=True)
    assert request.reply_start == "A. Force. The reason is that a"
    assert "will say: A. Force. The reason is that a newton" in request.messages[-1][1]
    assert "Force The" not in request.messages[-1][1]


def test_a_turn_cut_short_and_words_not_in_the_text_keep_the_rest_aligned():
    words = _said(TURNS, cut={1: 3})  # the assistant's first turn stops after "A. Force. The"
    words.insert(5, Word("A", "mm-hm", 1.6, 1.7))  # a word no turn's text has
    got = written_forms(words, TURNS)
    assert got[5] == "mm-hm"
    a = [g for w, g in zip(words, got) if w.speaker == "A"]
    assert a == ["mm-hm", "A.", "Force.", "The", "Watts", "measure", "power:", "one", "joule", "per", "second."]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.sampled_from("ab ,.?'"), min_size=1, max_size=30), min_size=1, max_size=4))
def test_the_written_forms_are_the_words_with_their_punctuation(texts):
    turns = [Turn("user" if i % 2 else "assistant", "BA"[i % 2], "", t) for i, t in enumerate(texts)]
    words = _said(turns)
    got = written_forms(words, turns)
    assert len(got) == len(words)
    for w, g in zip(words, got):
        assert spoken_words(g) == [w.word]


def test_a_clue_shown_as_written_ends_with_one_full_stop():
    """Level 4 shows the hint as written; its own punctuation ends the sentence (prompts v5)."""
    said = lambda hint: prompts.user_message("B: Tom has three apples", 4, hint, "A").split("\n\n")[-1]  # noqa: E731
    assert said("Eight apples.") == "Assistant will say: Eight apples. Say it nearly the same way."
    assert said("Is it twelve?") == "Assistant will say: Is it twelve? Say it nearly the same way."
    assert said("It goes, one hundred twenty,") == "Assistant will say: It goes, one hundred twenty. Say it nearly the same way."
    assert said("eight apples") == "Assistant will say: eight apples. Say it nearly the same way."
    for role, text in prompts.shared_messages():  # the few-shot example too
        assert ".." not in text and "?." not in text, text


def test_a_level_with_nothing_to_show_asks_as_level_0():
    """A hint of function words only ('Yes, it is.') has no clue words: no empty 'Clue: .' line."""
    zero = prompts.user_message("B: Is it?", 0, "", "A")
    assert prompts.user_message("B: Is it?", 2, "Yes, it is.", "A") == zero
    assert "Clue: Yes, it is." not in zero and "Clue:" in prompts.user_message("B: Is it?", 2, "Yes, it is water.", "A")


_WRITTEN = st.lists(st.tuples(st.sampled_from(["apples", "B", "it's", "twelve", "so", "the"]),
                              st.sampled_from(["", ",", ".", "?", "!", ";", ":", " -"])), max_size=8)


@settings(max_examples=300, deadline=None)
@given(_WRITTEN, st.integers(0, 4))
def test_no_instruction_adds_doubled_or_dangling_punctuation(pairs, level):
    """Whatever a written reply ends with, the instruction closes it with one mark of its own."""
    hint = " ".join(w + p for w, p in pairs)
    text = prompts.user_message("B: Tom has three apples", level, hint, "A").split("\n\n")[-1]
    for bad in ("..", ",.", ";.", ":.", "?.", "!.", "-.", "Clue: .", ": ."):
        assert bad not in text, (hint, text)


def test_clues_show_phrases_so_numbers_stay_whole():
    """Levels 1-3 show runs of the hint's content words, not loose words (prompts v6): shown 'fifty,
    six, dollars, eighty, cents', SmolLM2-135M answered 'five, dollars, eighty, cents'."""
    hint = "That would be B, fifty six dollars and eighty six cents."
    assert prompts.clue(hint, 3) == "B, fifty six dollars, eighty six cents"
    assert prompts.clue("Sure. The charge was two hundred and four dollars.", 3) == "Sure, charge, two hundred and four dollars"
    assert prompts.clue(hint, 1) == "B, fifty"  # a third of its six content words, cut mid-run


_HINT_WORDS = st.sampled_from(["apples", "B", "the", "twelve", "and", "hundred", "four", "so", "it's", "war", "of"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_HINT_WORDS, st.sampled_from(["", "", ",", "."])), max_size=14))
def test_clue_phrases_are_runs_of_the_hint_that_grow_with_the_level(pairs):
    hint = " ".join(w + p for w, p in pairs)
    distinct = prompts._content(hint, letters=True)
    flat = [w for w, _ in pairs]
    shown = []
    for level in (1, 2, 3):
        words = prompts.clue_words(hint, level)
        budget = min(prompts.MAX_KEYWORDS[level], -(-len(distinct) * prompts.KEYWORD_SHARE[level] // 1))
        assert words == distinct[:len(words)] and len(words) == (max(1, budget) if distinct else 0)
        for run in prompts.clue_phrases(hint, level):  # each phrase is words the hint says in a row
            assert run and run[-1].lower() != "and"
            assert any(flat[i:i + len(run)] == run for i in range(len(flat)))
        shown.append(set(words))
    assert shown[0] <= shown[1] <= shown[2]

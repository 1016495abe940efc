"""Speech QA and the Whisper aligner: normalisation, WER, mapping Whisper's words onto ours,
the manifest's quality summary; then the real bundled Whisper base on real voices."""

import difflib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kame_data.records import Dialogue, Reject, RenderedDialogue, Turn, TurnTiming
from kame_data.runner.manifest import dialogue_quality, quality_summary
from kame_data.speech.answer import AnswerCheckConfig
from kame_data.speech.stage import QAConfig, SpeakConfig, SpeakStage
from kame_data.speech.voice import VoiceConfig
from kame_data.speech.whisper import (
    HeardWord,
    line_up,
    normalise_words,
    start_error_ms,
    word_error_rate,
)
from kame_data.text import spoken_words, to_spoken
from kame_data.step import RunContext


def test_both_sides_normalise_the_same_way():
    assert normalise_words(" $24.50 for 24 apples.") == normalise_words(to_spoken("$24.50 for twenty-four apples"))
    assert normalise_words("It's B, Mars!") == ["its", "b", "mars"]  # apostrophes dropped on both sides
    assert normalise_words("OK, 3.5%") == ["okay", "three", "point", "five", "percent"]


def test_what_a_listener_cannot_tell_apart_is_no_error():
    # Whisper writes American spelling and runs spoken letters together (MT-Bench 107, 108)
    said = normalise_words("A is the father of B. B is the father of C. Which tyre, which colour?")
    heard = normalise_words("A is the father of bb is the father of C. Which tire, which color?")
    assert said == heard
    assert word_error_rate(said, heard) == 0
    # punctuation is not heard, so letters run together across it on both sides alike
    assert normalise_words("Is it A or B? I think so") == normalise_words("is it a or bi think so")
    assert normalise_words("option A, B or C") == ["option", "ab", "or", "c"]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abAB tyrecolu.,'- 12")), max_size=40))
def test_normalising_twice_changes_nothing(text):
    once = normalise_words(text)
    assert normalise_words(" ".join(once)) == once


def test_word_error_rate():
    assert word_error_rate(["a", "b", "c", "d"], ["a", "b", "c", "d"]) == 0
    assert word_error_rate(["a", "b", "c", "d"], ["a", "x", "c"]) == 0.5  # one substitution, one deletion
    assert word_error_rate(["a"], ["a", "b", "c"]) == 2.0
    assert word_error_rate([], []) == 0 and word_error_rate([], ["a"]) == 1.0


def test_line_up_maps_digits_and_misheard_words():
    tokens = spoken_words(to_spoken("It costs $24 for 3 apples."))  # It costs twenty four dollars for three apples
    heard = [HeardWord(" It", 0.0, 0.2), HeardWord(" costs", 0.2, 0.6), HeardWord(" $24", 0.7, 1.6),
             HeardWord(" for", 1.7, 1.9), HeardWord(" free", 2.0, 2.3), HeardWord(" apples.", 2.3, 2.9)]
    lined = line_up(tokens, heard)
    assert len(lined.spans) == len(tokens) == 8
    s = dict(zip(tokens, lined.spans))
    assert s["It"] == (0.0, 0.2) and s["apples"] == (2.3, 2.9)
    # "$24" -> twenty four dollars: its time shared out by letters
    assert lined.spans[2][0] == 0.7 and lined.spans[4][1] == 1.6 and lined.spans[2][1] < lined.spans[3][0] + 1e-9
    assert lined.spans[6] == (2.0, 2.3)  # "three" misheard as "free": still placed where it was said
    # only words Whisper wrote exactly as ours count for the start error
    assert lined.exact == [True, True, False, False, False, True, False, True]
    ours = [(0.05, 0.2), (0.3, 0.6), (0.7, 1.0), (1.0, 1.3), (1.3, 1.6), (1.75, 1.9), (2.0, 2.3), (2.4, 2.9)]
    assert start_error_ms(ours, lined) == pytest.approx(75.0)  # |Δ| 50, 100, 50, 100 -> median 75


def test_quality_summary_for_the_manifest():
    d = Dialogue("q-v0", "q", "test", "misc", 0, [])
    r1 = RenderedDialogue(d, np.zeros((10, 2), np.int16), 24000, [], [], turn_wer=(0.0, 0.1),
                          turn_start_error_ms=(40.0, None), clipped_samples=0, qa_retries=1)
    r2 = RenderedDialogue(d, np.zeros((10, 2), np.int16), 24000, [], [], turn_wer=(0.0, 0.0),
                          turn_start_error_ms=(60.0, 20.0), clipped_samples=7)
    q = quality_summary([r1, {"quality": dialogue_quality(r2)}])
    assert q["wer"] == {"turns": 4, "median": 0.0, "mean": 0.025, "p90": 0.1, "max": 0.1}
    assert q["word_start_error_ms"] == {"turns": 3, "median": 40.0, "mean": 40.0, "p90": 60.0, "max": 60.0}
    assert q["clipped_samples"] == 7 and q["clipped_dialogues"] == 1 and q["qa_voice_retries"] == 1
    assert quality_summary([]) == {"clipped_samples": 0, "clipped_dialogues": 0, "qa_voice_retries": 0}


def test_the_answer_round_trip_rate_comes_with_its_interval():
    """Dialogues the round trip heard (published with answer_checked, or rejected answer_lost by the
    speak step) and those that lost the answer: the rate and its 95% Wilson interval, on the card."""
    from kame_data.dataset.speech_card import round_trip_lines
    from kame_data.runner.manifest import wilson

    d = _dialogue("q-v0", "Is it A?", "It is A.")
    timings = [TurnTiming(0, 1, "a"), TurnTiming(1, 2, "b")]
    heard = RenderedDialogue(d, np.zeros((10, 2), np.int16), 24000, [], timings, turn_wer=(0.0, 0.1),
                             answer_checked=True)
    unheard = RenderedDialogue(d, np.zeros((10, 2), np.int16), 24000, [], timings, turn_wer=(None, None))
    lost = [Reject("speak", f"x-{i}-v0", "answer_lost", "B not heard") for i in range(2)]
    q = quality_summary([heard] * 18 + [unheard] * 5, lost + [Reject("script", "y-v0", "answer_lost", "template")])
    low, high = wilson(2, 20)
    assert q["answer_check"] == {"dialogues": 20, "lost": 2, "rate": 0.1, "ci95": [round(low, 4), round(high, 4)]}
    assert 0.02 < low < 0.1 < high < 0.32 and wilson(0, 20)[0] == 0.0 and wilson(20, 20)[1] == 1.0
    lines = round_trip_lines(q, {"qa": {"enabled": True, "sample": 0.05, "gpu_sample": 1.0}})
    text = "\n".join(lines)
    assert "| turns heard | 36 of 46 (78.3%); speak.qa: sample 0.05, gpu_sample 1 |" in text
    assert "answer lost (rejected after every voice) | 2 (10.0%, 95% interval 2.8%-30.1%)" in text
    assert "p90 0.1" in text


def test_qa_gpu_sample_draws_more_where_whisper_has_a_gpu():
    cfg = QAConfig(enabled=True, sample=0.05, gpu_sample=1.0)
    ids = [f"mmlu_pro-{i}-v0" for i in range(2000)]
    on_cpu = [i for i in ids if cfg.checks(7, i)]
    assert 0.03 < len(on_cpu) / len(ids) < 0.07 and all(cfg.checks(7, i, gpu=True) for i in ids)
    half = QAConfig(enabled=True, sample=0.05, gpu_sample=0.5)
    assert set(on_cpu) <= {i for i in ids if half.checks(7, i, gpu=True)}  # a larger share keeps the smaller's
    assert (cfg.share(), cfg.share(gpu=True), QAConfig(sample=0.5).share(gpu=True)) == (0.05, 1.0, 0.0)
    assert QAConfig(enabled=True, sample=0.2).share(gpu=True) == 0.2  # no gpu_sample: the sample everywhere
    with pytest.raises(ValueError, match="speak.qa.gpu_sample"):
        QAConfig(enabled=True, gpu_sample=0.0)


def test_qa_sample_draws_dialogues_by_seed_and_the_card_says_how_many_turns_were_checked():
    ids = [f"gsm8k-{i}-v0" for i in range(2000)]
    quarter = QAConfig(enabled=True, sample=0.25)
    drawn = [i for i in ids if quarter.checks(7, i)]
    assert 0.22 < len(drawn) / len(ids) < 0.28  # about the share asked for
    assert drawn == [i for i in reversed(ids) if quarter.checks(7, i)][::-1]  # per dialogue, not per run order
    assert drawn != [i for i in ids if quarter.checks(8, i)]  # the seed draws
    assert all(QAConfig(enabled=True).checks(7, i) for i in ids[:50])  # the default checks every dialogue
    assert not any(QAConfig(enabled=False, sample=1.0).checks(7, i) for i in ids[:50])
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="speak.qa.sample"):
            QAConfig(enabled=True, sample=bad)

    d = _dialogue("q-v0", "Is it A?", "It is A.")
    checked = RenderedDialogue(d, np.zeros((10, 2), np.int16), 24000, [], [TurnTiming(0, 1, "a"), TurnTiming(1, 2, "b")],
                               turn_wer=(0.0, 0.1))
    unheard = RenderedDialogue(d, np.zeros((10, 2), np.int16), 24000, [], [TurnTiming(0, 1, "a"), TurnTiming(1, 2, "b")],
                               turn_wer=(None, None))
    q = quality_summary([checked, unheard, unheard, unheard])
    assert q["qa_checked"] == {"turns": 8, "checked": 2, "share": 0.25} and q["wer"]["turns"] == 2
    from kame_data.dataset.speech_card import _sampled

    assert _sampled(q["qa_checked"]) == (" checked (2 of 8 turns, 25%: speak.qa.sample draws the dialogues "
                                         "Whisper hears)")
    assert _sampled(quality_summary([checked])["qa_checked"]) == ""  # every turn checked: nothing to say


def _dialogue(id: str, user: str, assistant: str) -> Dialogue:
    return Dialogue(id, id.rsplit("-", 1)[0], "test", "misc", 0, [
        Turn("user", "B", user, to_spoken(user)), Turn("assistant", "A", assistant, to_spoken(assistant))])


@pytest.mark.slow
def test_whisper_hears_piper_and_agrees_on_word_starts():
    """piper's own phoneme durations are the truth here. Whisper base put median word starts 67-84 ms
    early heard alone and 67-123 ms early when a dialogue's turns share one 30 s pass (measured on
    three sentence pairs), so the bound is 150 ms, under QA's reject limit of 200 ms; and the packed
    pass moves a word start at most a frame (80 ms; measured 0-10 ms) from where Whisper puts it
    hearing the turn alone."""
    from kame_data.speech.whisper import WhisperAligner, whisper_model_dir

    d = whisper_model_dir()
    assert (d / "model.bin").stat().st_size > 100_000_000 and (d / "tokenizer.json").is_file()
    stage = SpeakStage(SpeakConfig(user=VoiceConfig("piper", "joe"), qa=QAConfig(enabled=True), workers=1), RunContext(seed=1))
    r = stage.renderer.render(_dialogue(
        "qa-1-v0", "Which planet is known as the red planet? Is it A, Venus, or B, Mars?",
        "It's B, Mars, because iron oxide covers its surface. It costs $24.50 for 3 apples."))
    assert isinstance(r, RenderedDialogue), r
    assert max(r.turn_wer) <= 0.05, r.turn_wer
    assert all(e is not None and e <= 150 for e in r.turn_start_error_ms), r.turn_start_error_ms
    aligner = stage.renderer.aligner
    assert isinstance(aligner, WhisperAligner)

    mono = r.audio.astype(np.float32).mean(axis=1) / 32768
    clips = [(mono[int(t.start * r.sample_rate):int(t.end * r.sample_rate) + 1], r.sample_rate)
             for t in r.timings]
    packed = aligner.transcribe_many(clips)
    for clip, together in zip(clips, packed):
        alone = aligner.transcribe(*clip)
        # the two passes may hear a word differently (CI's CPU heard "iron" as "i earned" packed):
        # compare where they agree, and require them to agree on nearly every word
        heard = [" ".join(normalise_words(h.word)) for h in together], [" ".join(normalise_words(h.word)) for h in alone]
        match = difflib.SequenceMatcher(a=heard[0], b=heard[1], autojunk=False)
        pairs = [(i, j) for blk in match.get_matching_blocks() for i, j in zip(range(blk.a, blk.a + blk.size),
                                                                                  range(blk.b, blk.b + blk.size))]
        assert len(pairs) >= 0.85 * len(alone), heard
        moved = [abs(together[i].start - alone[j].start) * 1000 for i, j in pairs]
        assert np.median(moved) <= 80, moved


@pytest.mark.slow
def test_a_dialogue_qa_sample_leaves_out_is_not_heard_and_carries_no_wer():
    """With speak.qa.sample below 1, Whisper hears (and QA checks) only the drawn dialogues: a piper
    voice times its own words, so a dialogue left out costs no Whisper pass at all."""
    cfg = SpeakConfig(user=VoiceConfig("piper", "joe"), qa=QAConfig(enabled=True, sample=0.5), workers=1,
                      answer=AnswerCheckConfig(enabled=True))
    stage = SpeakStage(cfg, RunContext(seed=3))
    ids = [f"s-{i}-v0" for i in range(40)]
    heard_id = next(i for i in ids if cfg.qa.checks(3, i))
    left_id = next(i for i in ids if not cfg.qa.checks(3, i))
    renderer = stage.renderer
    renderer.load()
    passes = []
    real = renderer.aligner.transcribe_many
    renderer.aligner.transcribe_many = lambda clips: passes.append(len(clips)) or real(clips)
    user, assistant = "What is the capital of France?", "The capital of France is Paris."
    checked = renderer.render(_dialogue(heard_id, user, assistant))
    assert isinstance(checked, RenderedDialogue) and passes == [2]
    assert all(w is not None and w <= 0.2 for w in checked.turn_wer), checked.turn_wer
    left = renderer.render(_dialogue(left_id, user, assistant))
    assert isinstance(left, RenderedDialogue) and passes == [2], passes  # no pass for the dialogue left out
    assert left.turn_wer == (None, None) and left.turn_start_error_ms == (None, None)
    assert dialogue_quality(left)["wer"] == [] and dialogue_quality(left)["turns"] == 2
    # the answer round trip is part of QA: heard on the drawn dialogue (from QA's transcript), not on the other
    assert checked.answer_checked and not left.answer_checked


@pytest.mark.slow
def test_a_dialogue_refused_after_one_whose_answer_was_heard_is_a_reject_not_a_crash():
    """With the answer round trip on, a dialogue the speak step refuses before any engine speaks (a
    turn too long) comes back as its reject, whatever the dialogue before it heard. It once came back
    as an internal_error: the round trip's verdict was applied to the reject (a real MMLU-Pro row)."""
    cfg = SpeakConfig(user=VoiceConfig("piper", "joe"), qa=QAConfig(enabled=True), workers=1,
                      answer=AnswerCheckConfig(enabled=True), max_turn_seconds=20)
    renderer = SpeakStage(cfg, RunContext(seed=3)).renderer
    heard = renderer.render(_dialogue("s-1-v0", "What is the capital of France?", "The capital of France is Paris."))
    assert isinstance(heard, RenderedDialogue) and heard.answer_checked
    refused = renderer.render(_dialogue("s-2-v0", "Which option? " * 40, "The first one."))
    assert isinstance(refused, Reject) and refused.reason == "too_long", refused


@pytest.mark.slow
def test_a_voice_that_fails_qa_is_replaced_then_the_dialogue_rejected():
    # espeak's formant voices are hard for Whisper base (WER about 0.3); piper's Joe is not
    pool = (VoiceConfig("espeak", "en-us+f3", rate=200), VoiceConfig("piper", "joe"))
    cfg = SpeakConfig(user=pool, qa=QAConfig(enabled=True, max_wer=0.15, max_start_error_ms=160), workers=1)
    stage = SpeakStage(cfg, RunContext(seed=2))
    # a dialogue that draws the espeak voice first
    did = next(f"fb-{i}-v0" for i in range(100) if stage.renderer.candidates(f"fb-{i}-v0", "user")[0] == pool[0])
    user = "Which planet is known as the red planet? Is it Venus, or is it Mars?"
    r = stage.renderer.render(_dialogue(did, user, "Mars."))
    assert isinstance(r, RenderedDialogue), r
    assert r.timings[0].voice == "piper:joe" and r.qa_retries == 1 and r.turn_wer[0] <= 0.15

    strict = SpeakStage(SpeakConfig(user=pool, qa=QAConfig(enabled=True, max_wer=-1.0), workers=1), RunContext(seed=2))
    loaded = stage.renderer
    strict.renderer.engines, strict.renderer.aligner = loaded.engines, loaded.aligner  # reuse the loaded models
    rej = strict.renderer.render(_dialogue(did, user, "Mars."))
    assert isinstance(rej, Reject) and rej.reason == "qa_wer"
    assert "espeak:en-us+f3(rate=200)" in rej.detail and "piper:joe" in rej.detail

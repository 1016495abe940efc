"""The answer round-trip: the script records what states the answer, and after mixing Whisper must
still hear it on the assistant channel; a dialogue whose assistant audio says another answer is
re-rendered slower, then with the next voice, or rejected (`answer_lost`)."""

import json

import numpy as np
import pytest

from kame_data.records import Dialogue, Reject, RenderedDialogue, SourceItem, Turn
from kame_data.script.config import ScriptConfig
from kame_data.script.template import answer_key, script_item
from kame_data.speech.answer import AnswerCheckConfig, answer_heard
from kame_data.speech.stage import SpeakConfig, SpeakStage
from kame_data.speech.renderer import SLOWER
from kame_data.speech.voice import VoiceConfig, faster
from kame_data.text import to_spoken
from kame_data.step import RunContext


def test_answer_heard_forms():
    key = ["B", "Mars"]
    assert answer_heard(key, "It's B, Mars, because iron oxide covers it.")
    assert answer_heard(key, "I'd go with bee.")  # the letter as Whisper may spell it
    assert answer_heard(key, "Mars, definitely.")
    assert not answer_heard(key, "It's C, Jupiter, the largest planet.")
    assert not answer_heard(key, "Maybe be careful with that.")  # "be" with no letter cue before it
    assert answer_heard(["eighteen dollars"], "So it comes to $18.")  # Whisper's digits, normalised
    assert not answer_heard(["eighteen dollars"], "So it comes to $80.")
    long = ["the rate of photosynthesis increases with light intensity"]
    assert answer_heard(long, "I'd say the rate of photosynthesis increases with the light")  # 6 of 7 in order
    assert not answer_heard(long, "the rate of respiration falls")
    assert answer_heard([], "anything")  # nothing to check


def test_an_option_letter_before_a_text_that_starts_with_a_letter_is_heard():
    """Whisper's "C, I only" (a real MMLU-Pro answer, options of Roman-numbered statements) once read
    as the one word "ci", so neither the letter nor the text was found and a dialogue whose answer
    was heard right was rejected answer_lost."""
    assert answer_heard(["C", "I only"], "The answer is C, I only.")
    assert answer_heard(["C"], "It's C, A hundred metres.")
    assert not answer_heard(["B"], "The answer is C, I only.")
    assert not answer_heard(["B"], "It's C, B and D are wrong.")  # a B with no letter cue before it
    for letter, said in (("F", "eff"), ("G", "gee"), ("I", "eye"), ("J", "jay")):  # MMLU-Pro's ten options
        assert answer_heard([letter], f"The answer is {said}."), letter
        assert not answer_heard([letter], f"The answer is C, {said}."), letter


def _item(**kw) -> SourceItem:
    base = dict(id="t1", source="mmlu_pro", category="astronomy", question="Which planet is known as the red planet?",
                options=["Venus", "Mars", "Jupiter", "Saturn"], answer="Mars", answer_letter="B")
    return SourceItem(**{**base, **kw})


def test_a_long_option_text_is_in_the_key_so_a_missed_letter_does_not_lose_the_answer():
    """Whisper base hears "That would be B: the ..." as "That would be the ...": the letter merges with
    "be". The option's text, said whole, is the answer too, however long (a real MMLU-Pro history
    answer of 13 words was rejected answer_lost with only its letter in the key)."""
    long = "the kingdom had never won the loyalty of the many peoples it had taken over by force"
    item = _item(question="Why did the kingdom fall so quickly?", answer=long,
                 options=["a plague had struck the capital", long, "its army was away", "a drought"])
    key = answer_key(item)
    assert key == ["B", long]
    assert answer_heard(key, "That would be the kingdom had never won the loyalty of the many peoples it had taken over.")
    assert not answer_heard(key, "That would be a plague had struck the capital.")


def test_the_script_records_the_answer_key():
    assert answer_key(_item()) == ["B", "Mars"]
    d = script_item(_item(), 0, ScriptConfig(), seed=1)
    assert d.answer == ["B", "Mars"] and answer_heard(d.answer, d.turns[1].spoken)
    gsm = SourceItem(id="g", source="gsm8k", category="math", question="Janet has $3 and earns $15. How many dollars "
                     "does she have?", options=[], answer="18", answer_letter="", explanation="3 + 15 = 18.")
    assert answer_key(gsm) == [to_spoken("$18"), "eighteen"]
    assert answer_key(_item(answer="", answer_letter="", options=[])) == []
    essay = _item(options=[], answer_letter="", answer="a very long answer " * 5)
    assert answer_key(essay) == []  # an essay is not a phrase to find in a transcript


@pytest.mark.slow
def test_replaced_assistant_audio_loses_the_answer():
    user = "Which planet is known as the red planet? Is it A, Venus; or B, Mars?"

    def dialogue(reply: str) -> Dialogue:
        return Dialogue("rt-1-v0", "rt-1", "test", "misc", 0, [Turn("user", "B", user, to_spoken(user)),
                        Turn("assistant", "A", reply, to_spoken(reply))], answer=["B", "Mars"])

    cfg = SpeakConfig(assistant=VoiceConfig("piper", "joe"), user=VoiceConfig("espeak", "en-us+f3"), workers=1,
                      answer=AnswerCheckConfig(enabled=True))
    stage = SpeakStage(cfg, RunContext(seed=1))
    ok = stage.renderer.render(dialogue("It's B, Mars, because iron oxide covers its surface."))
    assert isinstance(ok, RenderedDialogue), ok
    # the same dialogue with another answer's audio on the assistant channel
    lost = stage.renderer.render(dialogue("It's C, Jupiter, the largest planet of all."))
    assert isinstance(lost, Reject) and lost.reason == "answer_lost" and lost.stage == "speak"
    assert "jupiter" in lost.detail.lower() and "piper:joe" in lost.detail
    # with a pool, the next assistant voice is tried before giving up
    two = SpeakStage(SpeakConfig(**{**cfg.__dict__, "assistant": (VoiceConfig("piper", "joe"),
                                                                  VoiceConfig("piper", "joe", length_scale=0.9))}), RunContext(seed=1))
    two.renderer.engines, two.renderer.aligner = stage.renderer.engines, stage.renderer.aligner
    lost2 = two.renderer.render(dialogue("It's C, Jupiter, the largest planet of all."))
    assert isinstance(lost2, Reject) and lost2.reason == "answer_lost"
    tried = lost2.detail.rsplit("(voices tried: ", 1)[1][:-1].split(", ")
    # each voice, then the same voice slower (a reading Whisper hears better), then the next voice
    voices = two.renderer.candidates("rt-1-v0", "assistant")
    assert tried == [x for v in voices for x in (v.label, faster(v, SLOWER).label)]
    assert "piper:joe(length_scale=1.15)" in tried


@pytest.mark.slow
def test_every_quickstart_dialogue_keeps_its_answer(quickstart_out):
    """The quickstart runs with the round-trip on: nothing was lost, and what the published assistant
    channel says still carries each item's answer."""
    from kame_data.audio import decode
    from kame_data.speech.whisper import WhisperAligner, transcript
    from tests.quickstart_identity import rows

    rejects = [json.loads(x) for x in (quickstart_out / "rejects.jsonl").read_text().splitlines() if x]
    assert not [r for r in rejects if r["reason"] == "answer_lost"], rejects
    manifest = json.loads((quickstart_out / "manifest.json").read_text())
    assert manifest["recipe"]["speak"]["answer"]["enabled"]
    aligner = WhisperAligner(1)
    from kame_data.recipe import load_recipe
    from kame_data.runner.config import RunConfig
    from kame_data.sources.step import SourcesStep

    config = RunConfig.resolve(load_recipe("quickstart"))
    items = {it.id: it for it in SourcesStep(config.recipe, config.filters).items()[0]}
    for row in rows(quickstart_out):
        pcm, sr = decode(row["audio"]["bytes"])
        said = [w for w in row["words"] if w["speaker"] == "A"]  # as the run listens: first word to last
        a, b = int(max(said[0]["start"] - 0.3, 0) * sr), int((said[-1]["end"] + 0.3) * sr)
        heard = transcript(aligner.transcribe(pcm[a:b, 0].astype(np.float32), sr))  # decode: floats in [-1, 1]
        assert answer_heard(answer_key(items[row["item_id"]]), heard), (row["id"], heard)

"""Real TTS: piper's bundled Joe voice and espeak-ng, word timings and the stereo mix."""

import numpy as np
import pytest

from kame_data.records import Dialogue, Turn
from kame_data.script.normalize import spoken_words, to_spoken
from kame_data.speech.engines import VoiceConfig, open_engine
from kame_data.speech.stage import SpeakConfig, SpeakStage
from tests.audio_checks import assert_speech_only_at_words

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stage():
    s = SpeakStage(SpeakConfig(), seed=7)
    s.open()
    return s


def _dialogue(user: str, assistant: str) -> Dialogue:
    return Dialogue("t-1-v0", "t-1", "test", "misc", 0, [
        Turn("user", "B", user, to_spoken(user)), Turn("assistant", "A", assistant, to_spoken(assistant))])


@pytest.mark.parametrize("cfg", [VoiceConfig("piper", "joe"), VoiceConfig("espeak", "en-us+f3"),
                                 VoiceConfig("espeak", "en-gb-x-rp+m3", rate=150)])
def test_engine_gives_a_span_per_word(cfg):
    text = to_spoken("Out of the 3 options, it's B: $24.50 for twenty-four apples.")
    syn = open_engine(cfg).synthesize(text)
    assert len(syn.spans) == len(spoken_words(text))
    assert syn.sample_rate == 22050 and len(syn.audio) > syn.sample_rate
    assert float(np.abs(syn.audio).max()) > 0.05


def test_rendered_dialogue(stage):
    r = stage.render(_dialogue("Which planet is known as the red planet? Is it A, Venus; or B, Mars?",
                               "It's B, Mars, because iron oxide covers its surface."))
    assert r.sample_rate == 24000 and r.audio.dtype == np.int16 and r.audio.shape[1] == 2
    words = [w.to_dict() for w in r.words]
    assert [w["word"] for w in words if w["speaker"] == "B"][:3] == ["Which", "planet", "is"]
    assert [w["word"] for w in words if w["speaker"] == "A"][-1] == "surface"
    starts = [(w["start"], w["end"]) for w in words]
    assert starts == sorted(starts)
    assert all(0 <= w["start"] <= w["end"] <= r.duration for w in words)
    # the user speaks first, the assistant answers after a gap
    last_b = max(w["end"] for w in words if w["speaker"] == "B")
    first_a = min(w["start"] for w in words if w["speaker"] == "A")
    assert 0.1 < first_a - last_b < 1.2
    assert_speech_only_at_words(r.audio.astype(np.float32) / 32768, r.sample_rate, words)
    assert r.timings[0].voice == "espeak:en-us+f3" and r.timings[1].voice == "piper:joe"


def test_overlong_turn_rejected(stage):
    long = " ".join(["word"] * 400)
    r = stage.render(_dialogue(long, "Okay."))
    assert r.reason == "too_long"

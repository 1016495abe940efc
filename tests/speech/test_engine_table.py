"""An engine is its module plus its entry in the engine table: a toy engine registered there alone
gets a label from its knobs, a faster copy through its tempo knob, a speaking rate for the plan,
and renders a whole dialogue through the real renderer."""

from __future__ import annotations

import numpy as np

from kame_data.records import Dialogue, RenderedDialogue, Turn
from kame_data.speech.config import SpeakConfig
from kame_data.speech.engine_spec import EngineSpec, Tempo
from kame_data.speech.engines import ENGINES
from kame_data.speech.stage import SpeakStage
from kame_data.speech.synthesis import Synthesis
from kame_data.speech.voice import VoiceConfig, faster, open_engine, words_per_second
from kame_data.step import RunContext
from kame_data.text import spoken_tokens, spoken_words, to_spoken

SR = 16000


class ToneEngine:
    """Each word a 0.25 s tone (its pitch from the knob), 0.1 s of silence between words."""

    def __init__(self, voice: str, threads: int | None = None, *, rate: int, pitch: int):
        self.hz = 100.0 + 2 * pitch

    def synthesize(self, text: str) -> Synthesis:
        tone = 0.3 * np.sin(2 * np.pi * self.hz * np.arange(int(0.25 * SR)) / SR).astype(np.float32)
        gap = np.zeros(int(0.1 * SR), np.float32)
        n = len(spoken_tokens(text))
        audio = np.concatenate([gap] + [x for _ in range(n) for x in (tone, gap)])
        spans = [(0.1 + 0.35 * k, 0.35 + 0.35 * k) for k in range(n)]
        return Synthesis(audio, SR, spans)


TONE = EngineSpec(name="tone", loader=ToneEngine, knobs=("rate", "pitch"), timed=True,
                  tempo=Tempo("rate", whole=True), words_per_second=2.0)


def test_a_toy_engine_in_the_table_is_a_voice_like_any_other(monkeypatch):
    monkeypatch.setitem(ENGINES, TONE.name, TONE)
    low = VoiceConfig("tone", "low", pitch=30)
    assert low.label == "tone:low(pitch=30)" and low.timed
    assert faster(low, 1.2).rate == 198 and faster(low, 1.2).label == "tone:low(rate=198,pitch=30)"
    assert words_per_second(low) == 2.0 and words_per_second(VoiceConfig("tone", "low", rate=330)) == 4.0
    # a calibration's measured rate for the engine replaces the table's; the knob still scales it
    assert words_per_second(VoiceConfig("tone", "low", rate=330), {"tone": 3.0}) == 6.0
    assert words_per_second(low, {"piper": 3.0}) == 2.0
    assert isinstance(open_engine(low), ToneEngine)

    user, assistant = "What is two plus two?", "It's four."
    d = Dialogue("tone-1-v0", "tone-1", "test", "misc", 0, [Turn("user", "B", user, to_spoken(user)),
                                                            Turn("assistant", "A", assistant, to_spoken(assistant))])
    stage = SpeakStage(SpeakConfig(assistant=VoiceConfig("tone", "high", pitch=90), user=low, workers=1), RunContext(seed=1))
    r = stage.renderer.render(d)
    assert isinstance(r, RenderedDialogue), r
    assert [t.voice for t in r.timings] == ["tone:low(pitch=30)", "tone:high(pitch=90)"]
    assert [w.word for w in r.words] == spoken_words(to_spoken(user)) + spoken_words(to_spoken(assistant))
    assert stage.renderer.aligner is None  # a timed engine needs no Whisper


class UntimedHibari:
    """hibari's speech without its word times: an engine of the kind Coqui is (timed=False)."""

    def __init__(self, voice: str, threads: int | None = None, *, speed: float):
        from kame_data.speech.hibari_engine import HibariEngine

        self.inner = HibariEngine(voice, threads, speed=speed)

    def synthesize(self, text: str) -> Synthesis:
        s = self.inner.synthesize(text)
        return Synthesis(s.audio, s.sample_rate, [(None, None)] * len(s.spans))


def test_an_engine_without_word_times_is_timed_by_the_whisper_aligner(monkeypatch):
    """The aligner path (every engine that cannot time its words, Coqui's): Whisper times the words,
    and they land where the speech is (within 0.3 s of the times hibari itself knows)."""
    spec = EngineSpec(name="untimed", loader=UntimedHibari, knobs=("speed",), timed=False, tempo=Tempo("speed"),
                      words_per_second=2.7)
    monkeypatch.setitem(ENGINES, spec.name, spec)
    user = "Janet sells sixteen duck eggs a day. How much does she make?"
    d = Dialogue("untimed-1-v0", "untimed-1", "test", "misc", 0, [Turn("user", "B", user, to_spoken(user))])
    voice = VoiceConfig("untimed", "heart")
    stage = SpeakStage(SpeakConfig(user=voice, assistant=voice, workers=1), RunContext(seed=1))
    r = stage.renderer.render(d)
    assert isinstance(r, RenderedDialogue), r
    assert stage.renderer.aligner is not None and not voice.timed
    assert [w.word for w in r.words] == spoken_words(to_spoken(user))
    from kame_data.speech.hibari_engine import HibariEngine

    own = HibariEngine("heart", 1, speed=1.0).synthesize(to_spoken(user)).spans
    offset = r.timings[0].start - own[0][0]  # where the turn was placed in the dialogue
    starts = [w.start for w in r.words]
    assert starts == sorted(starts)
    assert np.median([abs(w.start - (a + offset)) for w, (a, _) in zip(r.words, own)]) < 0.3

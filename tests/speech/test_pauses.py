"""Pauses inside a turn stay under the oracle's run rule (no 1.0 s gap inside a
user turn, where the ladder would put the true reply before the user has finished).

Unit tests of the cut on a clip of tones and silence (where every sample's origin is known), then
real engines: a three-sentence user turn from espeak-ng and (slow) piper, hibari (timed by its own
durations) and Coqui (timed by the Whisper aligner), every word-end gap under 1.0 s.
"""

from __future__ import annotations

import importlib.util
import os
import random

import numpy as np
import pytest

from kame_data.oracle.ladder import CONTINUATION_GAP, ladder
from kame_data.records import Dialogue, RenderedDialogue, Turn, Word
from kame_data.speech.config import PauseConfig, SpeakConfig
from kame_data.speech.pauses import long_gaps, pause_kinds, shape_pauses, untangle_overlaps
from kame_data.speech.stage import SpeakStage
from kame_data.speech.timing import voiced_frames
from kame_data.speech.voice import VoiceConfig, faster
from kame_data.text import spoken_words, to_spoken
from kame_data.step import RunContext

SR = 24000


def clip(segments: list[tuple[str, float]]) -> tuple[np.ndarray, list[tuple[float, float]]]:
    """('w', seconds) a 220 Hz tone (a word), ('_', seconds) silence; returns audio and word spans."""
    parts, spans, t = [], [], 0.0
    for kind, sec in segments:
        n = int(round(sec * SR))
        if kind == "w":
            parts.append((0.5 * np.sin(2 * np.pi * 220 * np.arange(n) / SR)).astype(np.float32))
            spans.append((round(t, 4), round(t + n / SR, 4)))
        else:
            parts.append(np.zeros(n, np.float32))
        t += n / SR
    return np.concatenate(parts), spans


def test_pause_kinds_follow_the_punctuation():
    text = "Okay, here's one. What is it? Is it A; or B, maybe - C"
    assert pause_kinds(text) == ["clause", "word", "sentence", "word", "word", "sentence", "word", "word",
                                 "clause", "word", "clause", "clause"]
    assert len(pause_kinds(text)) == len(spoken_words(text)) - 1


def test_long_pauses_are_redrawn_under_the_rule_and_only_silence_is_cut():
    # a 1.1 s sentence pause before a 0.3 s word, a 0.95 s one before a long 0.7 s word, a short one
    audio, spans = clip([("_", 0.2), ("w", 0.3), ("_", 1.1), ("w", 0.3), ("_", 0.95), ("w", 0.7), ("_", 0.1),
                         ("w", 0.25), ("_", 0.2)])
    assert [i for i, _ in long_gaps(spans, CONTINUATION_GAP)] == [1, 2]
    cfg = PauseConfig()
    out = shape_pauses(audio, SR, spans, ["sentence", "sentence", "word"], CONTINUATION_GAP, cfg, random.Random(1))
    assert out.redrawn == 2 and not long_gaps(out.spans, CONTINUATION_GAP)
    ends = [e for _, e in out.spans]
    assert all(b - a < CONTINUATION_GAP - cfg.margin + 1e-3 for a, b in zip(ends, ends[1:]))
    # the sentence pause is drawn from its range; the one before the long word is capped by it
    pauses = [out.spans[i + 1][0] - out.spans[i][1] for i in range(3)]
    assert cfg.sentence[0] - 1e-3 <= pauses[0] <= cfg.sentence[1]
    assert pauses[1] <= CONTINUATION_GAP - cfg.margin - 0.7 + 1e-3
    assert pauses[2] == pytest.approx(0.1, abs=1e-3)  # under the rule: left alone
    # the words are the same samples, only moved: each span still holds its whole tone
    assert len(out.audio) == len(audio) - int(round((1.1 - pauses[0]) * SR)) - int(round((0.95 - pauses[1]) * SR))
    voiced = voiced_frames(out.audio, SR)
    for s, e in out.spans:
        assert voiced[int(s / 0.01) + 1: int(e / 0.01) - 1].all()
    assert np.array_equal(out.audio[out.audio != 0], audio[audio != 0])  # every sound sample kept, in order


def test_pauses_vary_and_stay_inside_their_range():
    audio, spans = clip([("w", 0.3), ("_", 1.2), ("w", 0.25)])
    drawn = {round(shape_pauses(audio, SR, spans, ["sentence"], 1.0, PauseConfig(), random.Random(s)).spans[1][0]
                   - 0.3, 3) for s in range(20)}
    assert len(drawn) > 10 and min(drawn) >= 0.4 - 1e-3 and max(drawn) <= 1.0 - 0.05 - 0.25 + 1e-3


def test_a_pause_without_silence_is_reported_not_cut():
    # a "pause" that is all sound (the aligner put the words apart inside speech): nothing to cut
    audio, _ = clip([("w", 2.0)])
    spans = [(0.0, 0.3), (1.2, 1.5)]
    out = shape_pauses(audio, SR, spans, ["sentence"], 1.0, PauseConfig(), random.Random(0))
    assert out.redrawn == 0 and np.array_equal(out.audio, audio)
    assert long_gaps(out.spans, 1.0) == [(1, 1.2)]


def test_bound_off_keeps_the_engine_pauses_and_thinking_pauses_are_long():
    audio, spans = clip([("w", 0.3), ("_", 1.1), ("w", 0.3), ("_", 0.4), ("w", 0.3)])
    kept = shape_pauses(audio, SR, spans, ["sentence", "sentence"], 1.0, PauseConfig(bound=False), random.Random(0))
    assert kept.spans == spans and kept.thinking_before is None
    think = PauseConfig(thinking=1.0, thinking_seconds=(2.0, 2.5))
    out = shape_pauses(audio, SR, spans, ["sentence", "sentence"], 1.0, think, random.Random(3), thinking=True)
    i = out.thinking_before
    assert i in (1, 2) and 2.0 - 1e-3 <= out.spans[i][0] - out.spans[i - 1][1] <= 2.5
    assert long_gaps(out.spans, 1.0, skip=i) == []
    assert shape_pauses(audio, SR, spans, ["sentence", "sentence"], 1.0, think, random.Random(3)).thinking_before \
        is None  # only user turns


def test_overlaps_never_put_a_word_inside_the_previous_turn():
    # B's turn, then A overlapping by 0.3 s with a 0.2 s first word: A's word would end first
    gaps = untangle_overlaps([("B", 0.4), ("A", 0.2), ("B", 0.5)], [-0.3, -0.1])
    assert gaps == [pytest.approx(-0.18), -0.1]
    assert untangle_overlaps([("B", 0.4), ("B", 0.1)], [-0.3]) == [-0.3]  # same speaker: the mixer's business


def test_faster_voice_uses_each_engines_rate_knob():
    assert faster(VoiceConfig("piper", "joe"), 1.1).label == "piper:joe(length_scale=0.909)"
    assert faster(VoiceConfig("espeak", "en-us+f3", rate=165), 1.2).label == "espeak:en-us+f3(rate=198)"
    assert faster(VoiceConfig("hibari", "heart"), 1.1).label == "hibari:heart(speed=1.1)"
    assert faster(VoiceConfig("coqui", "/models/vits"), 1.1).speed == pytest.approx(1.1)


def test_the_speak_step_takes_its_bound_from_the_oracle_settings():
    from kame_data.recipe import load_recipe
    from kame_data.runner.config import RunConfig

    config = RunConfig.resolve(load_recipe("quickstart"))
    speak = config.build_steps()[1]
    assert speak.run_gap == config.oracle.run_gap == CONTINUATION_GAP
    assert speak.identity()["run_gap"] == CONTINUATION_GAP  # part of the checkpoint key


# --- real engines -------------------------------------------------------------------------------

THREE_SENTENCES = to_spoken("I have a question about cells. Which organelle makes most of a cell's energy? "
                            "My choices are the nucleus, the mitochondrion, or the ribosome.")


COQUI_MODEL = os.environ.get("KAME_DATA_COQUI_MODEL", "")


def _coqui_missing() -> str | None:
    if importlib.util.find_spec("TTS") is None:
        return ("coqui-tts is not installed (kept out of the default setup: it needs torch, torchaudio and torchcodec "
                "builds that load together); the aligner path Coqui voices take is tested with the aligner itself")
    if not COQUI_MODEL:
        return "no local Coqui model: set KAME_DATA_COQUI_MODEL to a model folder (catalogue models are never downloaded)"
    return None


def _render(voice: VoiceConfig, pauses: PauseConfig) -> RenderedDialogue:
    stage = SpeakStage(SpeakConfig(user=voice, workers=1, pauses=pauses), RunContext(seed=0))
    d = Dialogue("pause-1-v0", "pause-1", "test", "misc", 0, [Turn("user", "B", THREE_SENTENCES, THREE_SENTENCES)])
    r = stage.renderer.render(d)
    assert isinstance(r, RenderedDialogue), r
    return r


def _end_gaps(r: RenderedDialogue) -> list[float]:
    ends = [w.end for w in r.words]
    return [b - a for a, b in zip(ends, ends[1:])]


# espeak-ng renders in a fraction of a second (the fast tier); the neural engines are slow.
ENGINES = [pytest.param(VoiceConfig("piper", "joe"), marks=pytest.mark.slow),
           pytest.param(VoiceConfig("hibari", "heart"), marks=pytest.mark.slow),
           VoiceConfig("espeak", "en-us+f3"),
           pytest.param(VoiceConfig("coqui", COQUI_MODEL), marks=[pytest.mark.slow, pytest.mark.skipif(
               _coqui_missing() is not None, reason=_coqui_missing() or "")])]


@pytest.mark.parametrize("voice", ENGINES, ids=lambda v: v.engine)
def test_three_sentence_turn_keeps_every_word_end_gap_under_the_rule(voice):
    r = _render(voice, PauseConfig())
    assert [w.word for w in r.words] == spoken_words(THREE_SENTENCES)
    assert max(_end_gaps(r)) < CONTINUATION_GAP, max(_end_gaps(r))
    # the ladder sees one run: the ratio only climbs, and level 5 comes after the last word
    words = r.words + [Word("A", "okay", r.words[-1].end + 0.5, r.words[-1].end + 0.8)]
    inside = [s for s in ladder(words, 0.5, target_channel=0) if s.timestamp_ms / 1000 < r.words[-1].end]
    assert inside and all(s.level < 5 for s in inside)
    assert [s.current_spoken_ratio for s in inside] == sorted(s.current_spoken_ratio for s in inside)
    # against the engine's own pauses: those under the rule are kept as they were, the others shortened
    own = _render(voice, PauseConfig(bound=False))
    limit = CONTINUATION_GAP - PauseConfig().margin
    for k, gap in enumerate(_end_gaps(own)):
        before, after = _pause(own, k), _pause(r, k)
        if gap < limit:
            assert after == pytest.approx(before, abs=2e-3), (k, before, after)
        else:
            assert after < before and _end_gaps(r)[k] < limit, (k, gap, before, after)
    assert _pause(r, spoken_words(THREE_SENTENCES).index("Which") - 1) > 0.15  # sentence pauses stay pauses


def _pause(r: RenderedDialogue, k: int) -> float:
    return r.words[k + 1].start - r.words[k].end


def test_a_thinking_pause_is_kept_and_the_ladder_then_ends_the_run_there():
    """The explicit option: one long pause in the user's turn, kept (not a reject), and what the
    ladder does with it: level 5 at the pause, then, when the user goes on, the ratio falls back
    (the turn's words heard so far over all of them) and climbs again."""
    think = PauseConfig(thinking=1.0, thinking_seconds=(1.6, 2.0))
    r = _render(VoiceConfig("espeak", "en-us+f3"), think)
    long = [k for k in range(len(r.words) - 1) if _pause(r, k) >= 1.5]
    assert len(long) == 1 and r.words[long[0]].word in ("cells", "energy")  # at a sentence boundary
    assert 1.6 - 0.02 <= _pause(r, long[0]) <= 2.0 + 0.35  # the drawn seconds (the engine's own pause was shorter)
    words = r.words + [Word("A", "okay", r.words[-1].end + 0.5, r.words[-1].end + 0.8)]
    inside = [s for s in ladder(words, 0.5, target_channel=0) if s.timestamp_ms / 1000 < r.words[-1].end]
    at_pause = [s for s in inside if r.words[long[0]].end <= s.timestamp_ms / 1000 < r.words[long[0] + 1].end]
    assert at_pause and all(s.level == 5 for s in at_pause)
    after = [s for s in inside if s.timestamp_ms / 1000 >= r.words[long[0] + 1].end]
    assert after and after[0].level < 5 and after[0].current_spoken_ratio < 1
    assert [s.current_spoken_ratio for s in after] == sorted(s.current_spoken_ratio for s in after)

"""The speak stage: real TTS (piper's bundled Joe voice, espeak-ng), word timings, the stereo mix,
voice pools, turn-taking, rejects for text that cannot be spoken, and worker processes."""

import random

import numpy as np
import pytest

from kame_data.recipe import build_config
from kame_data.records import Dialogue, Reject, RenderedDialogue, Turn
from kame_data.speech.voice import VoiceConfig, open_engine
from kame_data.speech.voices import resolve, role_default
from kame_data.speech.mix import SpokenTurn, mix_turns
from kame_data.speech.stage import GapConfig, SpeakConfig, SpeakStage
from kame_data.text import spoken_words, to_spoken
from kame_data.step import RunContext
from tests.audio_checks import assert_speech_only_at_words
from tests.steps import run_flat


@pytest.fixture(scope="module")
def stage():
    s = SpeakStage(SpeakConfig(workers=1), RunContext(seed=7))
    s.setup()
    return s


def _dialogue(user: str, assistant: str, id: str = "t-1-v0") -> Dialogue:
    return Dialogue(id, id.rsplit("-", 1)[0], "test", "misc", 0, [
        Turn("user", "B", user, to_spoken(user)), Turn("assistant", "A", assistant, to_spoken(assistant))])


@pytest.mark.parametrize("cfg", [pytest.param(VoiceConfig("piper", "joe"), marks=pytest.mark.slow),
                                 VoiceConfig("espeak", "en-us+f3"), VoiceConfig("espeak", "en-gb-x-rp+m3", rate=150)])
def test_engine_gives_a_span_per_word(cfg):
    text = to_spoken("Out of the 3 options, it's B: $24.50 for twenty-four apples.")
    syn = open_engine(cfg).synthesize(text)
    assert len(syn.spans) == len(spoken_words(text))
    assert syn.sample_rate == 22050 and len(syn.audio) > syn.sample_rate
    assert float(np.abs(syn.audio).max()) > 0.05


@pytest.mark.slow
def test_rendered_dialogue(stage):
    r = stage.renderer.render(_dialogue("Which planet is known as the red planet? Is it A, Venus; or B, Mars?",
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
    # the catalogue's role defaults: a voice of the user pool, and Joe for the assistant
    users = {v.label for v in resolve(role_default("user"), "user")}
    assert r.timings[0].voice in users and r.timings[1].voice == resolve(role_default("assistant"), "assistant")[0].label
    assert r.clipped_samples == 0 and r.turn_wer == ()  # QA is off by default


def test_unspeakable_text_is_rejected_with_a_reason():
    """Checked before any engine loads: no model is needed, nothing crashes."""
    s = SpeakStage(SpeakConfig(workers=1))
    cases = {
        "empty_text": Dialogue("e-v0", "e", "test", "misc", 0, [Turn("user", "B", "…", " ... — !? "),
                                                                 Turn("assistant", "A", "Okay.", "Okay.")]),
        "too_long": _dialogue(" ".join(["word"] * 1600), "Okay."),  # about ten minutes
        "control_characters": Dialogue("c-v0", "c", "test", "misc", 0, [Turn("user", "B", "Hello there.",
                                                                          "Hello\x07 there\x00.")]),
        "unspeakable_word": _dialogue("Here: " + "x" * 500, "Okay."),
    }
    for reason, d in cases.items():
        r = s.renderer.render(d)
        assert isinstance(r, Reject) and r.reason == reason and r.stage == "speak" and r.detail, (reason, r)
    assert not s.renderer.engines  # rejected before loading anything


def test_a_long_text_is_refused_by_characters_too():
    s = SpeakStage(SpeakConfig(workers=1, max_turn_seconds=5))
    r = s.renderer.render(_dialogue("Supercalifragilisticexpialidocious " * 3, "Okay."))
    assert isinstance(r, Reject) and r.reason == "too_long"


def test_recipe_forms_single_voice_and_pool():
    single = build_config(SpeakConfig, {"assistant": {"engine": "piper", "voice": "joe", "length_scale": 0.95}})
    assert single.assistant == (VoiceConfig("piper", "joe", length_scale=0.95),)
    pool = build_config(SpeakConfig, {
        "assistant": [{"engine": "piper", "voice": "joe", "length_scale": 0.95}, {"engine": "hibari", "voice": "heart"}],
        "gap": [0.2, 0.6], "qa": {"enabled": True, "max_wer": 0.1}, "workers": 2, "lead_in": [0.1, 0.4]})
    assert [v.label for v in pool.assistant] == ["piper:joe(length_scale=0.95)", "hibari:heart"]
    assert pool.gap == GapConfig(distribution="uniform", low=0.2, high=0.6)
    assert pool.qa.enabled and pool.qa.max_wer == 0.1 and pool.workers == 2 and pool.lead_in == (0.1, 0.4)
    hash(pool)  # configs stay hashable
    normal = build_config(SpeakConfig, {"gap": {"distribution": "normal", "mean": 0.3, "sd": 0.2, "min": -0.2}})
    assert normal.gap.distribution == "normal" and normal.gap.min == -0.2


def test_voice_assignment_is_deterministic_and_uses_the_pool():
    cfg = SpeakConfig(assistant=(VoiceConfig("piper", "joe"), VoiceConfig("piper", "joe", length_scale=0.9),
                                 VoiceConfig("hibari", "heart")), workers=1)
    a, b = SpeakStage(cfg, RunContext(seed=3)), SpeakStage(cfg, RunContext(seed=3))
    firsts = set()
    for i in range(60):
        c = a.renderer.candidates(f"d-{i}-v0", "assistant")
        assert c == b.renderer.candidates(f"d-{i}-v0", "assistant")
        assert sorted(v.label for v in c) == sorted(v.label for v in cfg.assistant)  # fallbacks: the rest
        firsts.add(c[0])
    assert firsts == set(cfg.assistant)
    other = SpeakStage(cfg, RunContext(seed=4))
    assert [other.renderer.candidates(f"d-{i}-v0", "assistant")[0] for i in range(60)] != \
        [a.renderer.candidates(f"d-{i}-v0", "assistant")[0] for i in range(60)]


def test_gap_distribution_has_small_overlaps_within_bounds():
    g = GapConfig(distribution="normal", mean=0.3, sd=0.25, min=-0.2, max=1.0)
    rng = random.Random(0)
    gaps = [g.draw(rng) for _ in range(2000)]
    assert min(gaps) >= -0.2 and max(gaps) <= 1.0
    assert 0.02 < sum(x < 0 for x in gaps) / len(gaps) < 0.25
    assert min(g.draw(rng, same_speaker=True) for _ in range(500)) >= g.same_speaker_min
    with pytest.raises(ValueError):
        GapConfig(distribution="zipf").draw(rng)


def test_mix_overlapping_turns_keep_their_channels():
    sr = 1000
    tone = np.full(1000, 0.5, np.float32)
    turns = [SpokenTurn("B", tone, ["a", "b"], [(0.0, 0.5), (0.5, 1.0)], "v"),
             SpokenTurn("A", tone, ["c", "d"], [(0.0, 0.5), (0.5, 1.0)], "v")]
    pcm, words, timings = mix_turns(turns, [-0.2], sr, lead_in=0.1, tail=0.3)
    assert timings == [(0.1, 1.1), (0.9, 1.9)]  # A starts 0.2 s before B's last word ends
    assert [w[1] for w in words] == ["a", "b", "c", "d"] and words[2][2] == 0.9
    assert len(pcm) == round(2.2 * sr) and pcm[:, 0].max() > 0 and pcm[:, 1].max() > 0
    assert np.abs(pcm).max() < 32767  # no clipping: one speaker per channel


@pytest.mark.slow
def test_overlong_turn_rejected(stage):
    long = " ".join(["word"] * 400)
    r = stage.renderer.render(_dialogue(long, "Okay."))
    assert r.reason == "too_long"


@pytest.mark.slow
def test_workers_give_the_same_output_in_input_order():
    cfg = SpeakConfig(user=(VoiceConfig("espeak", "en-us+f3"), VoiceConfig("espeak", "en-gb-x-rp+m3", rate=150)))
    batch = [_dialogue("What is two plus two?", "It's four.", "w-1-v0"),
             _dialogue("Name a red planet.", "Mars is the red planet.", "w-2-v0"),
             Dialogue("w-3-v0", "w-3", "test", "misc", 0, [Turn("user", "B", "\x1b[2J", "\x1b[2J")]),
             _dialogue("Which gas do plants take in?", "Carbon dioxide, mostly.", "w-4-v0")]
    outputs = []
    for workers in (1, 2):
        stage = SpeakStage(SpeakConfig(**{**cfg.__dict__, "workers": workers}), RunContext(seed=5))
        try:
            outputs.append(run_flat(stage, batch))
        finally:
            stage.teardown()
    one, two = outputs
    assert [r.id for r in two] == [d.id for d in batch]
    assert isinstance(two[2], Reject) and two[2].reason == "control_characters"
    for a, b in zip(one, two):
        assert type(a) is type(b)
        if isinstance(a, RenderedDialogue):
            assert np.array_equal(a.audio, b.audio) and a.words == b.words and a.timings == b.timings

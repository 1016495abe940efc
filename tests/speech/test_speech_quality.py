"""The quality and acoustics steps on real renders (espeak-ng: fast, engine-timed): per-turn DNSMOS and
VAD figures, planted silent and clipped turns rejected with their reasons, and the user channel's
noise at the sampled SNR with the assistant channel bit-identical to the clean render."""

from dataclasses import replace

import numpy as np
import pytest

from kame_data.records import Dialogue, Reject, RenderedDialogue, Turn
from kame_data.speech.acoustics import colored_noise, draw_room, speech_mask
from kame_data.speech.config import AcousticsConfig, QualityConfig
from kame_data.speech.post import AcousticsStage, QualityStage
from kame_data.speech.stage import SpeakConfig, SpeakStage
from kame_data.speech.voice import VoiceConfig
from kame_data.text import to_spoken
from kame_data.step import RunContext

USER = "Which planet is known as the red planet? Is it A, Venus; or B, Mars? I always mix them up."
ASSISTANT = "It's B, Mars. Iron oxide, which is rust, covers its surface and makes it look red from far away."


@pytest.fixture(scope="module")
def rendered() -> RenderedDialogue:
    d = Dialogue("q-1-v0", "q-1", "test", "misc", 0, [Turn("user", "B", USER, to_spoken(USER)),
                                                     Turn("assistant", "A", ASSISTANT, to_spoken(ASSISTANT))])
    cfg = SpeakConfig(assistant=VoiceConfig("espeak", "en-gb-x-rp+m3", rate=160),
                      user=VoiceConfig("espeak", "en-us+f3"), workers=1, lead_in=1.0, tail=1.2, gap=(0.8, 0.8))
    r = SpeakStage(cfg, RunContext(seed=3)).renderer.render(d)
    assert isinstance(r, RenderedDialogue), r
    return r


@pytest.fixture(scope="module")
def quality() -> QualityStage:
    stage = QualityStage(QualityConfig(enabled=True), RunContext(seed=3))
    stage.setup()
    return stage


@pytest.mark.slow
def test_every_turn_gets_dnsmos_and_vad_figures(rendered, quality):
    out = quality.run([rendered])[0][0]
    assert isinstance(out, RenderedDialogue) and len(out.turn_quality) == 2
    for f in out.turn_quality:
        assert 1.0 <= f["dnsmos"] <= 5.0 and 1.0 <= f["dnsmos_sig"] <= 5.0 and 1.0 <= f["dnsmos_bak"] <= 5.0
        assert f["vad_word_share"] > 0.7 and f["vad_outside_s"] < 0.3  # speech inside the words, not outside
        assert f["clipped"] == 0 and -30 < f["lufs"] < -10
    assert np.array_equal(out.audio, rendered.audio)  # measuring changes nothing
    assert QualityStage(QualityConfig(), RunContext(seed=3)).run([rendered]) == [[rendered]]  # off: passes through


@pytest.mark.slow
def test_planted_silent_turn_and_clipped_turn_are_rejected(rendered, quality):
    sr = rendered.sample_rate
    silent = rendered.audio.copy()
    u = rendered.timings[0]
    silent[int((u.start - 0.3) * sr): int((u.end + 0.3) * sr), 1] = 0  # the user says nothing
    rej = quality.run([replace(rendered, audio=silent)])[0][0]
    assert isinstance(rej, Reject) and rej.reason == "silent_turn" and rej.detail.startswith("turn 0")

    clipped = rendered.audio.copy()
    a = rendered.timings[1]
    seg = slice(int(a.start * sr), int(a.end * sr))
    clipped[seg, 0] = np.clip(clipped[seg, 0].astype(np.int32) * 12, -32768, 32767).astype(np.int16)
    rej = quality.run([replace(rendered, audio=clipped)])[0][0]
    assert isinstance(rej, Reject) and rej.reason == "clipped" and rej.detail.startswith("turn 1")

    mumble = rendered.audio.copy()  # speech where no word is: the timings lie
    mumble[int((u.end + 0.2) * sr): int((u.end + 0.2) * sr) + int(0.6 * sr), 1] = rendered.audio[
        int(u.start * sr): int(u.start * sr) + int(0.6 * sr), 1]
    lenient = QualityStage(QualityConfig(enabled=True, dnsmos=False, max_speech_outside=0.2), RunContext(seed=3))
    lenient.setup()
    rej = lenient.run([replace(rendered, audio=mumble)])[0][0]
    assert isinstance(rej, Reject) and rej.reason == "speech_outside_words"
    strict_stage = QualityStage(QualityConfig(enabled=True, min_dnsmos=4.9), RunContext(seed=3))
    strict_stage.setup()
    strict = strict_stage.run([rendered])[0][0]
    assert isinstance(strict, Reject) and strict.reason == "low_dnsmos"


def _measured_snr(audio: np.ndarray, sr: int, spans) -> float:
    """SNR from the published channel alone: power inside the user's words minus the noise floor,
    against the noise floor measured at least 1 s from any user word."""
    x = audio[:, 1].astype(np.float64) / 32768
    inside = speech_mask(len(x), sr, spans)
    near = speech_mask(len(x), sr, [(max(s - 1.0, 0), e + 1.0) for s, e in spans])
    noise = float(np.mean(x[~near] ** 2))
    return 10 * np.log10((float(np.mean(x[inside] ** 2)) - noise) / noise)


@pytest.mark.parametrize("reverb", [0.0, 1.0])
def test_user_noise_matches_the_sampled_snr_and_the_assistant_stays_clean(rendered, reverb):
    spans = [(w.start, w.end) for w in rendered.words if w.speaker == "B"]
    for seed in range(3):
        cfg = AcousticsConfig(enabled=True, snr_db=(8.0, 25.0), reverb=reverb, rt60=(0.2, 0.4), rooms=2)
        out = AcousticsStage(cfg, RunContext(seed=seed)).run([rendered])[0][0]
        assert np.array_equal(out.audio[:, 0], rendered.audio[:, 0])  # the assistant: bit-identical
        assert out.words == rendered.words and len(out.audio) == len(rendered.audio)
        p = out.acoustics
        assert 8.0 <= p["snr_db"] <= 25.0 and p["noise"] in cfg.noise and p["mic"] in cfg.mic
        assert (p["room"] is not None) == bool(reverb)
        assert abs(_measured_snr(out.audio, rendered.sample_rate, spans) - p["snr_db"]) < 1.0, p
        again = AcousticsStage(cfg, RunContext(seed=seed)).run([rendered])[0][0]
        assert np.array_equal(again.audio, out.audio) and again.acoustics == p  # drawn from the seed


def test_noise_colours_and_rooms():
    rng = np.random.default_rng(0)
    for kind, slope in (("white", 0.0), ("pink", -3.0), ("brown", -6.0)):
        n = colored_noise(2 ** 16, kind, rng)
        assert abs(np.mean(n ** 2) - 1.0) < 1e-6
        p = np.abs(np.fft.rfft(n)) ** 2
        f = np.arange(len(p))
        lo, hi = p[(f > 200) & (f < 400)].mean(), p[(f > 1600) & (f < 3200)].mean()
        assert abs(10 * np.log10(hi / lo) / 3 - slope) < 1.5  # dB per octave
    room = draw_room(1, 0, (0.2, 0.5))
    assert 0.3 <= room["distance"] <= 2.5 and 0.2 <= room["rt60"] <= 0.5 and room == draw_room(1, 0, (0.2, 0.5))
    with pytest.raises(ValueError, match="microphone"):
        AcousticsConfig(mic=("telescope",))


@pytest.mark.slow  # over five seconds (tests/README.md)
def test_quality_and_acoustics_in_worker_processes_give_the_steps_own_results(rendered):
    """The runner runs these pure steps one process per core (runner/pooled.py): the outputs,
    rejects included, are the in-process step's, record for record, and in input order."""
    from kame_data.runner.pooled import PooledStep, pooled

    def named(r, suffix, **kw):
        return replace(r, dialogue=replace(r.dialogue, id=r.dialogue.id + suffix), **kw)

    batch = [rendered, named(rendered, "-silent", audio=np.zeros_like(rendered.audio)), named(rendered, "-again")]
    for step in (QualityStage(QualityConfig(enabled=True), RunContext(seed=3)),
                 AcousticsStage(AcousticsConfig(enabled=True), RunContext(seed=3))):
        step.setup()
        alone = step.run(batch)
        wrapped = PooledStep(step, 2)
        assert wrapped.name == step.name and wrapped.identity() == step.identity()
        assert wrapped.resources.concurrent_batches == 2
        wrapped.setup()
        try:
            got = wrapped.run(batch)
        finally:
            wrapped.teardown()
        assert [type(g[0]) for g in got] == [type(a[0]) for a in alone]
        for g, a in zip(got, alone):
            if isinstance(a[0], Reject):
                assert g == a
            else:
                assert g[0].id == a[0].id and np.array_equal(g[0].audio, a[0].audio)
                assert g[0].turn_quality == a[0].turn_quality and g[0].acoustics == a[0].acoustics
    off = QualityStage(QualityConfig(), RunContext(seed=3))
    assert pooled([off], 4) == [off]  # a step that is switched off stays in the driver

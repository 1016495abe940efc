"""Every offline voice renders through the speak stage: 24 kHz, word timings that cover the speech,
not silent, and audibly distinct from the others (long-term spectrum and pitch)."""

import importlib.util
import itertools

import numpy as np
import pytest

from kame_data.records import Dialogue, RenderedDialogue, Turn
from kame_data.speech.stage import SpeakConfig, SpeakStage
from kame_data.speech.voice import VoiceConfig
from kame_data.text import spoken_words, to_spoken
from kame_data.step import RunContext
from tests.audio_checks import frame_rms

pytestmark = pytest.mark.slow

VOICES = [
    VoiceConfig("piper", "joe"),  # neural, male US
    VoiceConfig("hibari", "heart"),  # neural, female US, timed by its own durations
    VoiceConfig("espeak", "en-us+f3"),  # formant, female US
    VoiceConfig("espeak", "en-gb-x-rp+m3", rate=150),  # formant, male British
    VoiceConfig("espeak", "en-029+m1"),  # formant, male Caribbean
]
TEXT = to_spoken("The quick brown fox jumps over the lazy dog, and then it runs away into the forest for 3 days.")


def _ltas(x: np.ndarray, sr: int) -> np.ndarray:
    """Long-term average spectrum in 32 log bands, level-free: a voice's timbre."""
    n, hop = 1024, 512
    frames = np.lib.stride_tricks.sliding_window_view(x, n)[::hop] * np.hanning(n)
    p = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    e = p.sum(1)
    p = p[e > e.max() * 1e-3]
    bands = np.array_split(np.arange(1, int(8000 / sr * n)), 32)
    lb = np.log10(np.stack([p[:, b].sum(1) for b in bands], 1) + 1e-10).mean(0)
    return lb - lb.mean()


def _median_f0(x: np.ndarray, sr: int) -> float:
    n, out = int(0.04 * sr), []
    for i in range(0, len(x) - n, n // 2):
        w = x[i: i + n]
        if np.sqrt((w ** 2).mean()) < 0.02 * np.abs(x).max():
            continue
        c = np.correlate(w, w, "full")[n - 1:]
        lo, hi = sr // 400, sr // 60
        k = lo + int(np.argmax(c[lo:hi]))
        if c[k] > 0.3 * c[0]:
            out.append(sr / k)
    return float(np.median(out))


@pytest.fixture(scope="module")
def rendered() -> dict[str, RenderedDialogue]:
    out = {}
    for v in VOICES:
        stage = SpeakStage(SpeakConfig(user=v, workers=1), RunContext(seed=0))
        d = Dialogue("voice-1-v0", "voice-1", "test", "misc", 0, [Turn("user", "B", TEXT, TEXT)])
        r = stage.renderer.render(d)
        assert isinstance(r, RenderedDialogue), (v.label, r)
        out[v.label] = r
    return out


@pytest.mark.parametrize("voice", [v.label for v in VOICES])
def test_voice_renders_with_timings_that_cover_its_speech(rendered, voice):
    r = rendered[voice]
    assert r.sample_rate == 24000 and r.audio.shape[1] == 2 and r.timings[0].voice == voice
    assert [w.word for w in r.words] == spoken_words(TEXT)
    starts = [w.start for w in r.words]
    assert starts == sorted(starts) and all(w.start <= w.end for w in r.words)
    x = r.audio[:, 1].astype(np.float32) / 32768
    # duration against word timings: lead-in before the first word, the tail after the last
    assert 0.2 <= r.words[0].start <= 0.6 and 0.3 <= r.duration - r.words[-1].end <= 0.8
    rms = frame_rms(x, r.sample_rate, 0.02)
    t = (np.arange(len(rms)) + 0.5) * 0.02
    inside = np.zeros(len(rms), bool)
    for w in r.words:
        inside |= (t >= w.start - 0.1) & (t <= w.end + 0.1)
    energy = rms ** 2
    assert energy[~inside].sum() / energy.sum() < 0.01, "speech outside the words"
    assert np.median([rms[(t >= w.start) & (t <= w.end)].max() for w in r.words if w.end - w.start > 0.03]) > 0.02
    assert not r.audio[:, 0].any()  # the other channel is silent


def test_voices_are_audibly_distinct(rendered):
    feats = {k: _ltas(r.audio[:, 1].astype(np.float32) / 32768, r.sample_rate) for k, r in rendered.items()}
    for a, b in itertools.combinations(feats, 2):
        assert np.linalg.norm(feats[a] - feats[b]) > 2.0, f"{a} and {b} sound alike"
    f0 = {k: _median_f0(r.audio[:, 1].astype(np.float32) / 32768, r.sample_rate) for k, r in rendered.items()}
    assert f0["hibari:heart"] > 160 and f0["espeak:en-us+f3"] > 160 and f0["piper:joe"] < 140


COQUI_MISSING = (
    "coqui-tts is not installed (`pip install kame-data[coqui]`, kept out of the default setup): coqui-tts 0.28 "
    "refuses to import without torchaudio and torchcodec, and their PyPI wheels need CUDA libraries "
    "(libc10_cuda.so, libnvrtc.so.13) that the CPU torch 2.13 wheel lacks; the only set that loads together "
    "is the ~7 GB CUDA build of torch 2.9.1 with torchaudio 2.9")


def _coqui_importable() -> bool:
    if importlib.util.find_spec("TTS") is None:
        return False
    try:
        import TTS.utils.synthesizer  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _coqui_importable(), reason=COQUI_MISSING)
def test_coqui_engine_on_a_random_vits_model(tmp_path):
    """The real load-from-disk code path, on a tiny randomly initialised VITS (no download)."""
    import torch
    from TTS.tts.configs.vits_config import VitsConfig
    from TTS.tts.models.vits import Vits, VitsArgs

    from kame_data.speech.voice import open_engine

    cfg = VitsConfig(use_phonemes=False, text_cleaner="english_cleaners")
    cfg.model_args = VitsArgs(hidden_channels=32, hidden_channels_ffn_text_encoder=64, num_layers_text_encoder=1,
                              num_heads_text_encoder=2, upsample_initial_channel_decoder=32, num_layers_flow=1,
                              num_layers_posterior_encoder=1, num_layers_dp_flow=1)
    model = Vits.init_from_config(cfg)
    torch.save({"model": model.state_dict(), "config": cfg.to_dict()}, tmp_path / "model.pth")
    cfg.save_json(str(tmp_path / "config.json"))
    engine = open_engine(VoiceConfig("coqui", str(tmp_path)), threads=1)
    text = to_spoken("Hello there, it costs 3 dollars.")
    syn = engine.synthesize(text)
    assert syn.sample_rate == cfg.audio.sample_rate and syn.audio.ndim == 1 and len(syn.audio) > 0
    assert len(syn.spans) == len(spoken_words(text)) and not engine.timed
    again = engine.synthesize(text)
    assert np.array_equal(syn.audio, again.audio)  # seeded: the same text, the same audio


def test_coqui_refuses_catalogue_names_instead_of_downloading():
    from kame_data.speech.coqui_engine import model_files

    with pytest.raises(RuntimeError, match="never does"):
        model_files("tts_models/en/ljspeech/vits")

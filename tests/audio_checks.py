"""Checks on rendered audio shared by the speech and end-to-end tests."""

import numpy as np

CHANNEL = {"A": 0, "B": 1}


def frame_rms(x: np.ndarray, sr: int, frame: float = 0.02) -> np.ndarray:
    hop = int(sr * frame)
    n = len(x) // hop
    return np.sqrt((x[: n * hop].reshape(n, hop).astype(np.float64) ** 2).mean(axis=1))


def assert_speech_only_at_words(pcm: np.ndarray, sr: int, words, margin: float = 0.15, frame: float = 0.02,
                                speakers=("A", "B")):
    """Each channel of `speakers` is voiced inside its speaker's words (backchannels included) and
    (nearly) silent elsewhere."""
    for speaker, ch in CHANNEL.items():
        if speaker not in speakers:
            continue
        rms = frame_rms(pcm[:, ch], sr, frame)
        spans = [(w["start"], w["end"]) for w in words if w["speaker"] == speaker]
        assert spans, f"no words for speaker {speaker}"
        t = (np.arange(len(rms)) + 0.5) * frame
        inside = np.zeros(len(rms), bool)
        for s, e in spans:
            inside |= (t >= s - margin) & (t <= e + margin)
        energy = rms ** 2
        outside_share = energy[~inside].sum() / max(energy.sum(), 1e-12)
        assert outside_share < 0.01, f"channel {ch} ({speaker}) has {outside_share:.1%} of its energy outside its words"
        word_rms = [rms[(t >= s) & (t <= e)].max() if ((t >= s) & (t <= e)).any() else 0 for s, e in spans]
        assert np.median(word_rms) > 0.01, f"channel {ch} ({speaker}) is silent during its words"

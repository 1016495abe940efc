"""Speaker variants: a new apparent speaker from an installed voice, by Praat's "Change gender".

Praat (through `praat-parselmouth`, the `variants` extra) resynthesises the audio with PSOLA:
formants scaled by `formant_shift` (vocal-tract length), the pitch contour moved to
`pitch_median` and its excursions scaled by `pitch_range`. The duration stays the same, so the
base engine's word spans still hold. Praat draws random numbers in its pitch analysis from a
generator seeded by the clock, so it is seeded with a constant before every change: the same text
gives the same audio in any process.
A variant is only as good as its intelligibility: the speak stage screens every pool voice with
Whisper before casting it (speech/voices.py).
"""

from __future__ import annotations

import numpy as np

from kame_data.speech.synthesis import Synthesis, TTSEngine

PITCH_FLOOR = 60.0  # Hz: Praat's pitch analysis range, wide enough for deep male and high female voices
PITCH_CEILING = 500.0


def change_voice(audio: np.ndarray, sample_rate: int, formant_shift: float = 1.0, pitch_median: float = 0.0,
                 pitch_range: float = 1.0) -> np.ndarray:
    """The audio spoken by a different apparent speaker, same length, float32."""
    try:
        import parselmouth
        from parselmouth.praat import call, run
    except ImportError as e:
        raise RuntimeError("speaker variants need `pip install kame-data[variants]` (praat-parselmouth)") from e
    if len(audio) < sample_rate // 10 or not np.any(audio):
        return audio.astype(np.float32)  # too short for a pitch analysis: nothing to change
    run("random_initializeWithSeedUnsafelyButPredictably (1)")  # else seeded from the clock
    sound = parselmouth.Sound(audio.astype(np.float64), sampling_frequency=float(sample_rate))
    out = call(sound, "Change gender", PITCH_FLOOR, PITCH_CEILING, float(formant_shift), float(pitch_median),
               float(pitch_range), 1.0)
    values = np.asarray(out.values[0], np.float32)
    if len(values) >= len(audio):  # PSOLA may add or drop a few samples at the end: keep the timeline
        return values[: len(audio)]
    return np.concatenate([values, np.zeros(len(audio) - len(values), np.float32)])


class VariantEngine:
    """A base engine whose every synthesis goes through `change_voice` (the spans stay the base's)."""

    def __init__(self, base: TTSEngine, formant_shift: float, pitch_median: float, pitch_range: float):
        self.base = base
        self.change = (formant_shift, pitch_median, pitch_range)

    def synthesize(self, text: str) -> Synthesis:
        return self.vary(self.base.synthesize(text))

    def vary(self, syn: Synthesis) -> Synthesis:
        """The base engine's synthesis spoken by this variant (so several variants of one voice can
        share one synthesis of a text: voice screening)."""
        return Synthesis(change_voice(syn.audio, syn.sample_rate, *self.change), syn.sample_rate, syn.spans)

"""WAV encoding and decoding (16-bit PCM) and resampling, without torch: the one place audio
changes form, so every stage hears the same samples."""

from __future__ import annotations

import io

import numpy as np
import soundfile as sf


def wav_bytes(pcm: np.ndarray, sample_rate: int) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, pcm, sample_rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def decode(data: bytes) -> tuple[np.ndarray, int]:
    """(frames × channels float32, sample rate)."""
    audio, sr = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    return audio, sr


def resample(audio: np.ndarray, sr: int, target: int) -> np.ndarray:
    """Float audio (frames, or frames × channels) at `target` Hz, as float32; soxr's HQ filter."""
    audio = np.asarray(audio, dtype=np.float32)
    if sr == target or not len(audio):
        return audio
    import soxr

    return soxr.resample(audio, sr, target, quality="HQ").astype(np.float32, copy=False)

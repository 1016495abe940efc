"""WAV encoding and decoding (16-bit PCM), without torch."""

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

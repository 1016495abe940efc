"""Placing spoken turns on a two-channel timeline: one speaker per channel, natural gaps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kame_data.records import CHANNEL


@dataclass(frozen=True)
class SpokenTurn:
    """One turn's mono audio at the output rate, its words and their spans relative to the turn."""

    speaker: str
    audio: np.ndarray
    words: list[str]
    spans: list[tuple[float, float]]
    voice: str


def loudness_normalise(audio: np.ndarray, target_dbfs: float, peak: float = 0.95) -> np.ndarray:
    """Scale to a target RMS over voiced samples, never past `peak` (so nothing clips)."""
    if not len(audio):
        return audio
    voiced = audio[np.abs(audio) > 1e-3]
    rms = float(np.sqrt(np.mean(voiced.astype(np.float64) ** 2))) if len(voiced) else 0.0
    if rms <= 0:
        return audio
    gain = 10 ** (target_dbfs / 20) / rms
    top = float(np.max(np.abs(audio)))
    if top * gain > peak:
        gain = peak / top
    return (audio * gain).astype(np.float32)


def mix_turns(turns: list[SpokenTurn], gaps: list[float], sample_rate: int, lead_in: float, tail: float):
    """Stereo int16 audio, absolute word timings [(speaker, word, start, end)] and turn (start, end).

    Each turn starts so that its first word begins `gap` seconds after the previous turn's last
    word ends (a negative gap is an overlap; turns of different speakers may overlap, each keeps
    its own channel).
    """
    offsets = []
    prev_last_end = None
    for k, t in enumerate(turns):
        first_start = t.spans[0][0] if t.spans else 0.0
        if prev_last_end is None:
            offset = lead_in - first_start
        else:
            offset = prev_last_end + gaps[k - 1] - first_start
        offset = max(offset, 0.0)
        offsets.append(offset)
        prev_last_end = offset + (t.spans[-1][1] if t.spans else len(t.audio) / sample_rate)
    end_words = prev_last_end or 0.0
    end_audio = max(o + len(t.audio) / sample_rate for o, t in zip(offsets, turns))
    total = int(np.ceil(max(end_words + tail, end_audio) * sample_rate))
    stereo = np.zeros((total, 2), np.float32)
    words = []
    timings = []
    for offset, t in zip(offsets, turns):
        a = int(round(offset * sample_rate))
        stereo[a: a + len(t.audio), CHANNEL[t.speaker]] += t.audio
        for w, (s, e) in zip(t.words, t.spans):
            words.append((t.speaker, w, round(float(offset + s), 4), round(float(offset + e), 4)))
        timings.append((round(float(offset + t.spans[0][0]), 4), round(float(offset + t.spans[-1][1]), 4)))
    pcm = (np.clip(stereo, -1.0, 1.0) * 32767).astype(np.int16)
    words.sort(key=lambda w: (w[2], w[3]))
    return pcm, words, timings


def overlay(pcm: np.ndarray, audio: np.ndarray, offset: float, channel: int, sample_rate: int) -> np.ndarray:
    """Int16 stereo `pcm` with mono float `audio` added to one channel from `offset` seconds (the
    result grows when the clip runs past its end)."""
    a = int(round(offset * sample_rate))
    if a + len(audio) > len(pcm):
        pcm = np.concatenate([pcm, np.zeros((a + len(audio) - len(pcm), pcm.shape[1]), pcm.dtype)])
    else:
        pcm = pcm.copy()
    mixed = pcm[a: a + len(audio), channel].astype(np.float64) + audio.astype(np.float64) * 32767
    pcm[a: a + len(audio), channel] = np.rint(np.clip(mixed, -32767, 32767)).astype(np.int16)
    return pcm

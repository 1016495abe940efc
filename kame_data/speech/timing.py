"""Completing and tightening word spans against the audio itself, and word spans from an engine's
phoneme timeline (piper, Kokoro)."""

from __future__ import annotations

import difflib
from pathlib import Path

import numpy as np

from kame_data.speech.synthesis import Span

FRAME = 0.01  # seconds


def _frame_rms(audio: np.ndarray, sr: int) -> np.ndarray:
    hop = max(int(sr * FRAME), 1)
    n = len(audio) // hop
    if n == 0:
        return np.zeros(0)
    frames = audio[: n * hop].reshape(n, hop).astype(np.float64)
    return np.sqrt((frames ** 2).mean(axis=1))


def complete_spans(spans: list[Span], weights: list[int], audio: np.ndarray, sr: int,
                   silence_db: float = -35.0) -> list[tuple[float, float]]:
    """Fill unknown starts/ends, keep spans ordered, and trim silence off both edges.

    Unknown starts are interpolated between known neighbours by `weights` (word lengths); an
    unknown end is the next word's start. Then each span shrinks to its voiced frames, so a
    pause after a comma belongs to no word.
    """
    n = len(spans)
    duration = len(audio) / sr
    starts = [s for s, _ in spans]
    ends = [e for _, e in spans]
    i = 0
    while i < n:
        if starts[i] is not None:
            i += 1
            continue
        j = i
        while j < n and starts[j] is None:
            j += 1
        lo = ends[i - 1] if i > 0 and ends[i - 1] is not None else (starts[i - 1] if i > 0 else 0.0)
        hi = starts[j] if j < n else duration
        lo = min(lo if lo is not None else 0.0, hi)
        total = sum(weights[i:j]) or 1
        acc = 0
        for k in range(i, j):
            starts[k] = lo + (hi - lo) * acc / total
            acc += weights[k]
            if ends[k] is None:
                ends[k] = lo + (hi - lo) * acc / total
        i = j
    for k in range(n):
        if ends[k] is None:
            ends[k] = starts[k + 1] if k + 1 < n else duration
    rms = _frame_rms(audio, sr)
    threshold = (rms.max() if len(rms) else 0.0) * 10 ** (silence_db / 20)
    voiced = rms > threshold
    out: list[tuple[float, float]] = []
    prev_end = 0.0
    for s, e in zip(starts, ends):
        s = max(float(s), prev_end)
        e = min(max(float(e), s), duration)
        a, b = int(s / FRAME), min(int(np.ceil(e / FRAME)), len(voiced))
        # An edge frame that only grazes the span, cut off from it by silence, holds the neighbour's
        # onset or tail: counting it would put the whole pause before the next word into this one.
        if b - a > 2 and b * FRAME > e + 1e-9 and voiced[b - 1] and not voiced[b - 2]:
            b -= 1
        if b - a > 2 and a * FRAME < s - 1e-9 and voiced[a] and not voiced[a + 1]:
            a += 1
        idx = np.flatnonzero(voiced[a:b]) if b > a else np.zeros(0, int)
        if len(idx):
            s2 = (a + idx[0]) * FRAME
            e2 = min((a + idx[-1] + 1) * FRAME, duration)
            s, e = max(s, s2), max(min(e, e2), max(s, s2))
        out.append((round(s, 4), round(e, 4)))
        prev_end = e
    return out


def voiced_frames(audio: np.ndarray, sr: int, silence_db: float = -35.0) -> np.ndarray:
    """Per FRAME of the clip: whether it is voiced, by the same threshold as `complete_spans`."""
    rms = _frame_rms(audio, sr)
    if not len(rms) or rms.max() <= 0:
        return np.zeros(len(rms), bool)
    return rms > rms.max() * 10 ** (silence_db / 20)


def voiced_extent(audio: np.ndarray, sr: int, silence_db: float = -35.0) -> tuple[float, float] | None:
    """(first, last) voiced instant of a clip, by the same frame threshold as `complete_spans`."""
    idx = np.flatnonzero(voiced_frames(audio, sr, silence_db))
    if not len(idx):
        return None
    return float(idx[0] * FRAME), float(min((idx[-1] + 1) * FRAME, len(audio) / sr))


def cover_voice(spans: list[tuple[float, float]], audio: np.ndarray, sr: int) -> list[tuple[float, float]]:
    """Stretch the first start and the last end out to the voiced extent of the clip.

    For spans that came from a recogniser: Whisper may start the first word late or end the last
    one early, and speech outside every word would be mistaken for silence by a trainer.
    """
    extent = voiced_extent(audio, sr)
    if not spans or extent is None:
        return spans
    out = list(spans)
    out[0] = (round(min(out[0][0], extent[0]), 4), out[0][1])
    out[-1] = (out[-1][0], round(max(out[-1][1], extent[1]), 4))
    return out


def write_timed_model(model, durations: str, out: Path) -> Path:
    """Save an ONNX model (an `onnx.ModelProto`) with its duration tensor `durations` as an extra
    output, atomically (parallel workers may race to write it): the engines whose graphs know
    each token's duration (Kokoro, hibari) time their words from it."""
    import onnx

    from kame_data.atomic import atomic_path

    model.graph.output.append(onnx.helper.make_tensor_value_info(durations, onnx.TensorProto.FLOAT, None))
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        onnx.save(model, str(tmp))
    return out


STRESS = set("ˈˌ")  # misaki stress marks: the onset of the vowel after them
NOT_SOUNDS = set(" ˈˌː.,;:!?—…\"()“”")  # phoneme-string characters that make no sound of their own


def phoneme_sounds(chars: list[str], frames, frame: int, length: int) -> list[tuple[str, int, int]]:
    """(sound, start sample, end sample) of each sounding phoneme of a model's input `chars`, from
    the model's per-token durations (`frames` units of `frame` samples, the pads at both ends
    included), for the engines that expose them (Kokoro, hibari)."""
    ends = np.cumsum(np.asarray(frames, np.float64).ravel()) * frame
    starts = np.concatenate([[0.0], ends[:-1]])
    sounds, onset = [], None
    for k, c in enumerate(chars, start=1):  # token 0 is the leading pad
        a, b = int(starts[k]), int(min(ends[k], length))
        if c in STRESS:
            onset = a if onset is None else onset  # a stress mark is the onset of the vowel after it
        elif c in NOT_SOUNDS:
            onset = None
        else:
            sounds.append((c, a if onset is None else onset, b))
            onset = None
    return sounds


def align_phonemes(words: list[str], phonemise, sounds: list[tuple[str, int, int]], sr: int) -> list[Span]:
    """Word spans from an engine's phoneme timeline, by aligning per-word phonemisations to it."""
    expected: list[str] = []
    owner: list[int] = []
    for i, w in enumerate(words):
        ph = phonemise(w)
        expected += ph
        owner += [i] * len(ph)
    first: list[int | None] = [None] * len(words)
    last: list[int | None] = [None] * len(words)
    matcher = difflib.SequenceMatcher(None, expected, [s[0] for s in sounds], autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        for k in range(size):
            i, j = owner[a + k], b + k
            first[i] = j if first[i] is None else min(first[i], j)
            last[i] = j if last[i] is None else max(last[i], j)
    # Unmatched phonemes between two matched words belong to the earlier word's tail or the
    # unmatched words in between; give unmatched words the gap, split by expected length.
    spans: list[Span] = [(None, None)] * len(words)
    i = 0
    while i < len(words):
        if first[i] is not None:
            spans[i] = (sounds[first[i]][1] / sr, sounds[last[i]][2] / sr)
            i += 1
            continue
        j = i
        while j < len(words) and first[j] is None:
            j += 1
        lo = (last[i - 1] + 1) if i > 0 and last[i - 1] is not None else 0
        hi = first[j] if j < len(words) else len(sounds)
        pool = sounds[lo:hi]
        weights = [max(len(phonemise(words[k])), 1) for k in range(i, j)]
        total = sum(weights)
        cursor = 0.0
        for k, wgt in zip(range(i, j), weights):
            if pool:
                a = int(round(cursor / total * len(pool)))
                b = max(int(round((cursor + wgt) / total * len(pool))), a + 1)
                seg = pool[min(a, len(pool) - 1): min(b, len(pool))]
                spans[k] = (seg[0][1] / sr, seg[-1][2] / sr)
            cursor += wgt
        i = j
    return spans

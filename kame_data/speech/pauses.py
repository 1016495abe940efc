"""Pauses inside a turn, kept below the oracle's run rule.

The oracle ladder (docs/design.md) ends a speaker's run where a word ends `CONTINUATION_GAP` (1.0 s)
or more after the previous one. Engines leave 0.8-1.1 s between sentences, so such a pause looked
like the end of the user's turn: the ratio reached 1.0 and the oracle handed over the true reply
(level 5) before the question was over. Here every pause that would reach the rule is redrawn
from a natural range for its kind, capped so that the next word (whose length counts too) still
ends `margin` before the rule, and the difference is cut out of the silence. Only silent frames
are ever cut, so no speech is lost; a pause that cannot be brought under the rule is reported.

At turn boundaries an overlap may start the next turn early, but its first word must end after
the previous turn's last word: otherwise the ladder sees the other speaker inside the turn.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from kame_data.speech.config import PauseConfig
from kame_data.speech.timing import FRAME, voiced_frames
from kame_data.text import spoken_tokens

GUARD = 0.02  # seconds of silence kept on each side of a cut, so word edges are never touched
FADE = 0.005  # crossfade at a join
FIRST_WORD_LEAD = 0.02  # an overlapping turn's first word ends at least this long after the previous turn
_TAIL = re.compile(r"[^\w']*$")


def pause_kinds(spoken: str) -> list[str]:
    """Per pair of neighbouring words: 'sentence' (. ? ! between them), 'clause' (, ; : or a dash) or 'word'."""
    tokens = spoken_tokens(spoken)
    kinds = []
    for (_, a), (_, b) in zip(tokens, tokens[1:]):
        tail = _TAIL.search(spoken[a:b].rstrip()).group(0)
        kinds.append("sentence" if re.search(r"[.?!]", tail) else "clause" if re.search(r"[,;:\-]", tail) else "word")
    return kinds


@dataclass(frozen=True)
class Shaped:
    """A turn after `shape_pauses`: its audio and spans, the pauses redrawn, and where a thinking
    pause was put (the index of the word after it, or None)."""

    audio: np.ndarray
    spans: list[tuple[float, float]]
    redrawn: int
    thinking_before: int | None


def _silence(voiced: np.ndarray, a: float, b: float) -> tuple[float, float] | None:
    """The longest stretch of silent frames between a and b seconds."""
    fa, fb = int(np.ceil(a / FRAME)), min(int(b / FRAME), len(voiced))
    best: tuple[int, int] | None = None
    k = fa
    while k < fb:
        if voiced[k]:
            k += 1
            continue
        j = k
        while j < fb and not voiced[j]:
            j += 1
        if best is None or j - k > best[1] - best[0]:
            best = (k, j)
        k = j
    return None if best is None else (best[0] * FRAME, best[1] * FRAME)


def _apply(audio: np.ndarray, sr: int, edits: list[tuple[int, int]]) -> np.ndarray:
    """Cut (n > 0) or insert (n < 0) |n| samples at each position, joining with short fades."""
    m = max(int(FADE * sr), 1)
    ramp = np.linspace(0.0, 1.0, m, dtype=np.float32)
    pieces, last = [], 0
    for pos, n in sorted(edits):
        if n > 0:  # crossfade the m samples before the cut into the m samples that end it
            pieces.append(audio[last: pos - m])
            pieces.append(audio[pos - m: pos] * (1 - ramp) + audio[pos + n - m: pos + n] * ramp)
            last = pos + n
        else:
            pieces.append(audio[last: pos - m])
            pieces.append(audio[pos - m: pos] * (1 - ramp))
            pieces.append(np.zeros(-n, np.float32))
            pieces.append(audio[pos: pos + m] * ramp)
            last = pos + m
    pieces.append(audio[last:])
    return np.concatenate(pieces).astype(np.float32)


def shape_pauses(audio: np.ndarray, sr: int, spans: list[tuple[float, float]], kinds: list[str], bound: float,
                 cfg: PauseConfig, rng: random.Random, thinking: bool = False) -> Shaped:
    """Bring every pause under the run rule `bound` (when `cfg.bound`), and put one thinking pause
    into the turn with probability `cfg.thinking` when `thinking` (user turns)."""
    voiced = voiced_frames(audio, sr)
    think_at = None
    sentences = [i for i, k in enumerate(kinds) if k == "sentence"]
    if thinking and cfg.thinking > 0 and sentences and rng.random() < cfg.thinking:
        think_at = rng.choice(sentences)
    limit = bound - cfg.margin
    edits: list[tuple[int, int]] = []
    shift_after: list[tuple[float, float]] = []  # (time in the old clip, seconds added after it)
    redrawn = 0
    for i, kind in enumerate(kinds):
        (_, e0), (s1, e1) = spans[i], spans[i + 1]
        silence = _silence(voiced, e0, s1)
        if silence is None or silence[1] - silence[0] < 2 * GUARD + 2 * FADE:
            continue
        mid = (silence[0] + silence[1]) / 2
        if i == think_at:
            extra = rng.uniform(*cfg.thinking_seconds) - (s1 - e0)
            if extra > 0:
                edits.append((int(round(mid * sr)), -int(round(extra * sr))))
                shift_after.append((mid, int(round(extra * sr)) / sr))
            continue
        if not cfg.bound or e1 - e0 < limit:
            continue
        pause = s1 - e0
        lo, hi = getattr(cfg, kind)
        hi = max(min(hi, limit - (e1 - s1), pause), 0.0)
        target = rng.uniform(min(lo, hi), hi)
        cut = min(pause - target, silence[1] - silence[0] - 2 * GUARD - 2 * FADE)
        n = int(round(cut * sr))
        if n > 0:
            edits.append((int(round(mid * sr)) - n // 2, n))
            shift_after.append((mid, -n / sr))
            redrawn += 1
    if not edits:
        return Shaped(audio, list(spans), 0, think_at + 1 if think_at is not None else None)
    out = _apply(audio, sr, edits)
    shaped = []
    for s, e in spans:
        d = sum(x for t, x in shift_after if t < s)
        shaped.append((round(s + d, 4), round(e + d, 4)))
    duration = len(out) / sr
    shaped = [(min(s, duration), min(e, duration)) for s, e in shaped]
    return Shaped(out, shaped, redrawn, think_at + 1 if think_at is not None else None)


def long_gaps(spans: Sequence[tuple[float, float]], bound: float, skip: int | None = None) -> list[tuple[int, float]]:
    """(i, seconds) for each word i that ends `bound` or more after word i - 1 (but word `skip`)."""
    return [(i, round(spans[i][1] - spans[i - 1][1], 4)) for i in range(1, len(spans))
            if i != skip and spans[i][1] - spans[i - 1][1] >= bound]


def untangle_overlaps(first_words: Sequence[tuple[str, float]], gaps: list[float]) -> list[float]:
    """Gaps between turns such that no overlap puts a word of the next turn inside the previous one.

    `first_words`: per turn, its speaker and the length of its first word. A negative gap starts the
    next turn before the previous one's last word ends; it is kept as long as that first word still
    ends FIRST_WORD_LEAD after it, else the ladder would read the previous turn's run as over.
    """
    out = list(gaps)
    for k in range(1, len(first_words)):
        speaker, length = first_words[k]
        if speaker != first_words[k - 1][0] and out[k - 1] < 0:
            out[k - 1] = max(out[k - 1], FIRST_WORD_LEAD - length)
    return out

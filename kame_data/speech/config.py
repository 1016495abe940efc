"""The speak step's config: voice pools per role, turn gaps, pauses inside turns, silences,
loudness and speech QA."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Union

from kame_data.records import ASSISTANT, USER
from kame_data.speech.engines import VoiceConfig


@dataclass(frozen=True)
class GapConfig:
    """The silence between one turn's last word and the next turn's first word (negative: overlap).

    `uniform` draws from [low, high]; `normal` from N(mean, sd) clipped to [min, max], which gives
    mostly short gaps and a few small overlaps when `min` < 0. Two turns of the same speaker
    never overlap (at least `same_speaker_min` apart).
    """

    distribution: str = "uniform"
    low: float = 0.25
    high: float = 0.8
    mean: float = 0.4
    sd: float = 0.25
    min: float = -0.3
    max: float = 1.5
    same_speaker_min: float = 0.2

    def draw(self, rng: random.Random, same_speaker: bool = False) -> float:
        if self.distribution == "uniform":
            gap = rng.uniform(self.low, self.high)
        elif self.distribution == "normal":
            gap = min(max(rng.gauss(self.mean, self.sd), self.min), self.max)
        else:
            raise ValueError(f"unknown gap distribution {self.distribution!r} (uniform, normal)")
        return max(gap, self.same_speaker_min) if same_speaker else gap


@dataclass(frozen=True)
class QAConfig:
    """Whisper checks every turn: word error rate against the spoken text, and the median gap
    between our word starts and Whisper's (engine-timed turns only)."""

    enabled: bool = False
    max_wer: float = 0.4  # per turn: one word in three misheard is still a usable turn, two are not
    max_start_error_ms: float = 200.0  # Whisper base itself often puts starts 50-100 ms early


@dataclass(frozen=True)
class PauseConfig:
    """Pauses inside a turn (see speech/pauses.py).

    The oracle ladder ends a speaker's run where a word ends 1.0 s or more after the previous one
    (records.CONTINUATION_GAP, DESIGN.md); engines leave 0.8-1.1 s between sentences, which made a
    pause look like the end of the turn and handed the oracle the true reply early. With `bound`,
    a pause that would reach the run rule is redrawn from the range of its kind (after . ? ! from
    `sentence`, after , ; : from `clause`, else `word`), capped so the next word ends `margin`
    before the rule, and cut out of the silence. `bound: false` keeps the engines' pauses;
    `thinking` gives a user turn one long pause (seconds from `thinking_seconds`) at a sentence
    boundary with that probability. The ladder then ends the user's run at such a pause: level 5
    (the true reply) while the user has more to say; when the user goes on, the ratio falls back
    (the turn's words heard so far over all of them) and climbs again. Both therefore need
    `oracle.early_truth: keep`.
    """

    bound: bool = True
    sentence: tuple = (0.4, 0.75)
    clause: tuple = (0.2, 0.45)
    word: tuple = (0.05, 0.2)
    margin: float = 0.05
    thinking: float = 0.0
    thinking_seconds: tuple = (1.5, 3.0)

    def __post_init__(self) -> None:
        for name in ("sentence", "clause", "word", "thinking_seconds"):
            v = getattr(self, name)
            if len(v) != 2 or not 0 <= v[0] <= v[1]:
                raise ValueError(f"speak.pauses.{name}: give [low, high] seconds with 0 <= low <= high, got {v!r}")
            object.__setattr__(self, name, (float(v[0]), float(v[1])))
        if not 0 <= self.thinking <= 1:
            raise ValueError(f"speak.pauses.thinking is a probability, got {self.thinking!r}")

    @property
    def long_pauses(self) -> bool:
        """Whether turns may hold pauses the run rule reads as the end of the turn."""
        return not self.bound or self.thinking > 0


VoicePool = Union[VoiceConfig, tuple]  # a recipe gives one voice or a list of them


@dataclass(frozen=True)
class SpeakConfig:
    sample_rate: int = 24000
    assistant: VoicePool = field(default_factory=lambda: VoiceConfig(engine="piper", voice="joe"))
    user: VoicePool = field(default_factory=lambda: VoiceConfig(engine="espeak", voice="en-us+f3", rate=165))
    gap: GapConfig = field(default_factory=GapConfig)  # a recipe's [low, high] means uniform
    pauses: PauseConfig = field(default_factory=PauseConfig)
    lead_in: Any = 0.3  # seconds of silence before the first word: a number, or [low, high]
    tail: Any = 0.4  # after the last word
    target_dbfs: float = -20.0
    max_turn_seconds: float = 90.0
    qa: QAConfig = field(default_factory=QAConfig)
    workers: int | None = None  # worker processes; None: one per core

    def __post_init__(self) -> None:
        # Recipes arrive as plain mappings and lists: make every field its typed, hashable form.
        for role in ("assistant", "user"):
            object.__setattr__(self, role, _voice_pool(getattr(self, role), role))
        if isinstance(self.gap, (list, tuple)):
            if len(self.gap) != 2:
                raise ValueError(f"speak.gap: give [low, high] or a mapping, got {self.gap!r}")
            object.__setattr__(self, "gap", GapConfig(distribution="uniform", low=float(self.gap[0]),
                                                      high=float(self.gap[1])))
        elif isinstance(self.gap, dict):
            object.__setattr__(self, "gap", GapConfig(**self.gap))
        if isinstance(self.qa, dict):
            object.__setattr__(self, "qa", QAConfig(**self.qa))
        if isinstance(self.pauses, dict):
            object.__setattr__(self, "pauses", PauseConfig(**self.pauses))
        for name in ("lead_in", "tail"):
            v = getattr(self, name)
            if isinstance(v, list):
                object.__setattr__(self, name, tuple(v))

    def pool(self, role: str) -> tuple[VoiceConfig, ...]:
        return self.assistant if role == ASSISTANT else self.user  # type: ignore[return-value]

    @property
    def voices(self) -> list[VoiceConfig]:
        """Every distinct voice of both pools, in order."""
        return list(dict.fromkeys(self.pool(ASSISTANT) + self.pool(USER)))


def _voice_pool(value: Any, role: str) -> tuple[VoiceConfig, ...]:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items:
        raise ValueError(f"speak.{role}: the voice pool is empty")
    return tuple(v if isinstance(v, VoiceConfig) else VoiceConfig(**v) for v in items)

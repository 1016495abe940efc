"""Typed records passed between stages.

Every stage is a function from a batch of one record type to a batch of the next (plus
`Reject`s). Each record has a JSON Schema in `schemas/` with the same field names; `to_dict`
gives the JSON form the schemas describe.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

ASSISTANT = "assistant"
USER = "user"
# The speaker/channel convention (docs/design.md), as in moshi-finetune and kame_finetune's
# `--moshi_speakers A`: the assistant is speaker A on the left channel (0), the user speaker B on
# the right channel (1).
SPEAKER = {ASSISTANT: "A", USER: "B"}
ROLE = {speaker: role for role, speaker in SPEAKER.items()}
CHANNEL = {"A": 0, "B": 1}
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # multiple-choice option letters, in option order
# docs/design.md's run rule: a speaker's run goes on while each word ends less than this many seconds
# after the previous one. The oracle ladder ends runs by it; the speak step keeps every pause inside
# a turn below it, so a turn is one run (one value here, read by both).
CONTINUATION_GAP = 1.0
# docs/design.md: a ratio above 0.99 is level 5 (the true reply). A run of more words than this passes it
# while its last word is still to come, so no user turn may be longer (script/template.py).
MAX_RUN_WORDS = 100


@dataclass(frozen=True)
class FollowUp:
    """A later user turn of a multi-turn item (MT-Bench's second question) and its reference answer
    ("" when the source gives none)."""

    question: str
    answer: str = ""


@dataclass(frozen=True)
class SourceItem:
    """One benchmark item, normalised across sources (display text, not yet spoken)."""

    id: str
    source: str
    category: str
    question: str
    options: list[str]  # option texts in letter order A, B, C, …; empty for open questions
    answer: str  # the answer as display text (for multiple choice: the option text)
    answer_letter: str  # "" for open questions
    explanation: str = ""  # worked solution / chain of thought, display text
    license: str = ""
    meta: dict[str, str] = field(default_factory=dict)
    followups: list[FollowUp] = field(default_factory=list)  # later user turns, in order
    variants: int = 0  # dialogues to script from this item (set by sampling); 0: the script config's count
    # The variant numbers to script, when the allocation chose them (sources/allocate.py: a refused
    # variant is replaced by the next one); empty: 0 .. variants - 1.
    variant_numbers: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Records read back from JSON carry follow-ups as plain mappings.
        if any(isinstance(f, dict) for f in self.followups):
            object.__setattr__(self, "followups", [f if isinstance(f, FollowUp) else FollowUp(**f)
                                                   for f in self.followups])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Turn:
    """One turn: who speaks, what is shown (`text`) and what is said (`spoken`)."""

    role: str  # "assistant" | "user"
    speaker: str  # "A" | "B"
    text: str
    spoken: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Dialogue:
    id: str
    item_id: str
    source: str
    category: str
    variant: int
    turns: list[Turn]
    # Spoken forms any one of which states the correct answer (a lone capital letter is an option
    # letter); the speak step checks the rendered audio still carries one. Empty: nothing to check.
    answer: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Word:
    speaker: str
    word: str
    start: float
    end: float
    # A listener's "mm-hm" inside the other speaker's turn: in the audio and the word stream, not
    # on the floor (the oracle ladder reads the floor words only; docs/design.md, "Floor words").
    backchannel: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TurnTiming:
    """Where a turn landed in the mixed audio, and which voice spoke it."""

    start: float
    end: float
    voice: str


@dataclass(frozen=True)
class RenderedDialogue:
    """A dialogue spoken: stereo int16 audio (frames × 2) and word timings in seconds."""

    dialogue: Dialogue
    audio: np.ndarray
    sample_rate: int
    words: list[Word]
    timings: list[TurnTiming]
    # Speech QA (kame_data/speech/whisper.py), per turn; empty when QA is off. None: not measured
    # (start errors of turns timed by Whisper itself).
    turn_wer: tuple[float | None, ...] = ()
    turn_start_error_ms: tuple[float | None, ...] = ()
    clipped_samples: int = 0  # samples at full scale after mixing
    qa_retries: int = 0  # voices that failed QA before the ones used
    # Per-turn quality figures from the quality step (speech/quality.py), one dict per turn.
    turn_quality: tuple[dict, ...] = ()
    # What the acoustics step did to the user channel (speech/acoustics.py); empty: clean.
    acoustics: dict = field(default_factory=dict)
    # Turn-taking that shaped this dialogue: per turn, words cut off by a barge-in.
    turn_cut_words: tuple[int, ...] = ()
    answer_checked: bool = False  # the answer round trip heard the answer (speak.answer, on QA's sample)

    @property
    def id(self) -> str:
        return self.dialogue.id

    @property
    def duration(self) -> float:
        return len(self.audio) / self.sample_rate


ORACLE_REFERENCE_FIELDS = (
    "timestamp_ms",
    "conversation_context",
    "prediction",
    "total_word_count",
    "trigger_word",
    "recent_words",
    "current_spoken_ratio",
    "channel",
    "hint",
)


@dataclass(frozen=True)
class OracleEvent:
    """One oracle step. Field order of the first nine is kame_finetune's `oracle_raw` order."""

    timestamp_ms: int
    conversation_context: str
    prediction: str
    total_word_count: int
    trigger_word: str
    recent_words: list[str]
    current_spoken_ratio: float
    channel: int
    hint: str
    level: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def reference_dict(self) -> dict[str, Any]:
        """Only the fields kame_finetune reads, in its order."""
        d = self.to_dict()
        return {k: d[k] for k in ORACLE_REFERENCE_FIELDS}


@dataclass(frozen=True)
class Sample:
    """A finished training example: the rendered dialogue plus its oracle ladder."""

    rendered: RenderedDialogue
    oracle: list[OracleEvent]

    @property
    def id(self) -> str:
        return self.rendered.id


@dataclass(frozen=True)
class Reject:
    """Something a stage refused, with a machine-readable reason code and a human detail.

    `transient`: the refusal says nothing about the input (a timeout, a server or engine error, a
    spent budget), so it is not checkpointed and a rerun tries again; otherwise it is final (the
    input can never pass: a filter, unspeakable text, QA failing on every voice)."""

    stage: str
    id: str
    reason: str
    detail: str = ""
    transient: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def reasons_line(rejects: Iterable[Reject] | Mapping[str, int], most: int = 6) -> str:
    """Rejects (or their counts by reason code) as one line of a summary, most first:
    "malformed_question 5, too_long 2" (past `most` reasons, the rest summed)."""
    counts = rejects if isinstance(rejects, Mapping) else Counter(r.reason for r in rejects)
    ranked = sorted(((n, r) for r, n in counts.items() if n), key=lambda nr: (-nr[0], nr[1]))
    shown = ", ".join(f"{r} {n:,}" for n, r in ranked[:most])
    rest = sum(n for n, _ in ranked[most:])
    return shown + (f", {len(ranked) - most} more reasons {rest:,}" if rest else "")

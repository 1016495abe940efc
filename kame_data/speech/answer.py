"""The answer round-trip: after mixing, Whisper listens to the assistant channel, and what it heard
must still carry the correct answer (the number, the option letter or the option's text).

The dialogue's `answer` (set by the script step) lists spoken phrases any one of which states the
answer; a lone capital letter is an option letter. A phrase counts as heard when its words occur
in order in the transcript (all of them for phrases of up to three words, `min_phrase_match` of
them for longer ones); a letter counts when Whisper heard it where a letter is said ("it's B",
"option B", "B, Mars", or first). TTS that swallows a digit, a barge-in that cuts the result off,
a mix that misplaces a turn: each fails this check, and the stage tries the assistant pool's next
voice or rejects the dialogue (`answer_lost`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from kame_data.speech.limits import Share

LETTER_CUES = {"is", "it's", "its", "option", "options", "answer", "with", "be", "letter", "choice", "say", "pick",
               "choose", "go"}


@dataclass(frozen=True)
class AnswerCheckConfig:
    """`speak.answer`: check the rendered answer, and how strictly a long phrase must be heard."""

    enabled: bool = False  # check that the answer is still heard after mixing
    min_phrase_match: Share = 0.75  # share of a long answer phrase's words that must be heard, in order


def _in_order(phrase: Sequence[str], heard: Sequence[str]) -> int:
    """How many of `phrase`'s words occur in `heard` in order (longest common subsequence)."""
    prev = [0] * (len(heard) + 1)
    for p in phrase:
        cur = [0] * (len(heard) + 1)
        for j, h in enumerate(heard, 1):
            cur[j] = prev[j - 1] + 1 if p == h else max(prev[j], cur[j - 1])
        prev = cur
    return prev[-1]


# How Whisper may spell a letter said alone, for the option letters MMLU-Pro uses (A-J; H it writes as H).
_LETTER_NAMES = {"a": ("ay",), "b": ("bee",), "c": ("see",), "d": ("dee",), "e": ("ee",), "f": ("ef", "eff"),
                 "g": ("gee",), "i": ("eye",), "j": ("jay",)}


def _letter_heard(letter: str, heard: Sequence[str]) -> bool:
    names = {letter.lower(), *_LETTER_NAMES.get(letter.lower(), ())}
    for i, w in enumerate(heard):
        if w in names and (i == 0 or heard[i - 1] in LETTER_CUES):
            return True
    return False


def answer_heard(answer: Sequence[str], transcript: str, min_phrase_match: float = 0.75) -> bool:
    """Whether `transcript` (what Whisper heard) carries any form of the answer; True when there is
    no answer to check."""
    from kame_data.speech.whisper import join_letter_runs, normalise_words

    if not answer:
        return True
    spelled = normalise_words(transcript, join_letters=False)  # "is C, I only": the letter alone
    heard = join_letter_runs(spelled)
    for form in answer:
        if len(form) == 1 and form.isupper():
            if _letter_heard(form, spelled):
                return True
            continue
        words = normalise_words(form)
        if not words:
            continue
        need = len(words) if len(words) <= 3 else max(1, round(min_phrase_match * len(words)))
        if _in_order(words, heard) >= need:
            return True
    return False


def answer_lost(aligner, answer: Sequence[str], rendered, cfg: AnswerCheckConfig) -> str | None:
    """None when Whisper hears the answer on the assistant channel of a RenderedDialogue (or there
    is none to check), else what it heard instead. Only the stretch from the assistant's first word
    to its last is transcribed."""
    from kame_data.speech.whisper import transcript

    own = [w for w in rendered.words if w.speaker == "A" and not w.backchannel]
    if not answer or not own:
        return None
    sr = rendered.sample_rate
    a, b = int(max(own[0].start - 0.3, 0) * sr), int((own[-1].end + 0.3) * sr)
    return answer_lost_in(answer, transcript(aligner.transcribe(rendered.audio[a:b, 0].astype(np.float32) / 32768,
                                                                sr)), cfg)


def answer_lost_in(answer: Sequence[str], heard: str, cfg: AnswerCheckConfig) -> str | None:
    """`answer_lost` on a transcript already made: None when it carries the answer."""
    if answer_heard(answer, heard, cfg.min_phrase_match):
        return None
    return f"Whisper heard {heard[:160]!r}, which lacks {' / '.join(answer)!r}"

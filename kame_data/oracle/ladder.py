"""The oracle ladder: which steps fire, with what context, ratio, level and hint.

This is the exact reference semantics of docs/design.md ("Oracle events"), computed in one pass
over the words instead of rescanning them at every step. The prediction is filled in later
by the simulator LLM (or, at level 5, is the hint itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kame_data.records import CONTINUATION_GAP, Word

RECENT = 5
LEVEL_BOUNDS = ((0.5, 0), (0.65, 1), (0.8, 2), (0.95, 3), (0.99, 4))


def hint_level(ratio: float) -> int:
    for bound, level in LEVEL_BOUNDS:
        if ratio <= bound:
            return level
    return 5


@dataclass(frozen=True)
class LadderStep:
    """One oracle step before prediction."""

    timestamp_ms: int
    conversation_context: str
    total_word_count: int
    trigger_word: str
    recent_words: list[str]
    current_spoken_ratio: float
    channel: int
    next_speaker: str
    true_reply: str  # the next speaker's next utterance (the hint at full strength)
    level: int
    written_reply: str = ""  # the same words as written (punctuation kept) where the ladder was given them

    @property
    def reply_shown(self) -> str:
        """What the simulator's prompt shows of the true reply (oracle/shown.py)."""
        return self.written_reply or self.true_reply

    @property
    def hint(self) -> str:
        """The record's `hint` field: the true reply once more than half the run was heard."""
        return self.true_reply if self.current_spoken_ratio > 0.5 else ""


def floor_words(words: Sequence[Word]) -> list[Word]:
    """The words the ladder reads: all but listener backchannels, which are in the audio and the
    word stream but do not take the floor (docs/design.md, "Floor words"). The rules above then apply
    to these words exactly as written."""
    return [w for w in words if not getattr(w, "backchannel", False)]


def ladder(words: Sequence[Word], interval: float = 0.5, target_channel: int | None = None,
           channels: dict[str, int] | None = None, only_new_words: bool = False,
           written: Sequence[str] | None = None) -> list[LadderStep]:
    """All steps of one dialogue (two speakers), in time order.

    `only_new_words` keeps a step only if words arrived since the previous kept step (steps
    in between would repeat the same request). `written`: each word's written form (parallel to
    `words`), for the steps' `written_reply`; nothing else depends on it."""
    channels = channels or {"A": 0, "B": 1}
    order = sorted(range(len(words)), key=lambda i: words[i].end)  # stable: ties keep input order, as the reference does
    ws = [words[i] for i in order]
    shown = [written[i] for i in order] if written is not None else None
    n = len(ws)
    if n == 0:
        return []
    speakers = sorted(channels)
    other = {speakers[0]: speakers[1], speakers[1]: speakers[0]}

    # ext[i]: last index of the time-continuous same-speaker run that starts growing at i.
    ext = list(range(n))
    for i in range(n - 2, -1, -1):
        if ws[i + 1].speaker == ws[i].speaker and ws[i + 1].end - ws[i].end < CONTINUATION_GAP:
            ext[i] = ext[i + 1]
    # run_end[i]: last index of the maximal same-speaker run containing i (no time limit).
    run_end = list(range(n))
    for i in range(n - 2, -1, -1):
        if ws[i + 1].speaker == ws[i].speaker:
            run_end[i] = run_end[i + 1]
    # next_of[s][i]: first index >= i spoken by s (n if none).
    next_of = {s: [n] * (n + 1) for s in speakers}
    for i in range(n - 1, -1, -1):
        for s in speakers:
            next_of[s][i] = i if ws[i].speaker == s else next_of[s][i + 1]

    steps: list[LadderStep] = []
    lines: list[str] = []  # completed runs of the context
    run_words: list[str] = []  # words of the context's current (last) run
    run_start = 0  # index in ws of the current run's first word
    k = 0  # |W|
    last_end = ws[-1].end
    t = interval
    while t < last_end:
        while k < n and ws[k].end <= t:
            if k > 0 and ws[k].speaker != ws[k - 1].speaker:
                lines.append(f"{ws[k - 1].speaker}: {' '.join(run_words)}")
                run_words = []
                run_start = k
            run_words.append(ws[k].word)
            k += 1
        if k >= 2:
            current = ws[k - 1].speaker
            nxt = other[current]
            channel = channels[nxt]
            if (target_channel is None or channel == target_channel) and not (
                    only_new_words and steps and steps[-1].total_word_count == k):
                j = next_of[nxt][k]
                if j >= n:
                    break  # the next speaker never speaks again: generation stops
                heard = k - run_start
                complete = ext[k - 1] - run_start + 1
                ratio = heard / complete
                context = "\n".join(lines + [f"{current}: {' '.join(run_words)}"])
                steps.append(LadderStep(
                    timestamp_ms=int(t * 1000),
                    conversation_context=context,
                    total_word_count=k,
                    trigger_word=ws[k - 1].word,
                    recent_words=[w.word for w in ws[max(0, k - RECENT): k]],
                    current_spoken_ratio=ratio,
                    channel=channel,
                    next_speaker=nxt,
                    true_reply=" ".join(w.word for w in ws[j: run_end[j] + 1]),
                    level=hint_level(ratio),
                    written_reply=" ".join(shown[j: run_end[j] + 1]) if shown is not None else "",
                ))
        t += interval
    return steps

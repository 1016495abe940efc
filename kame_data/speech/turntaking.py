"""Live turn-taking: listener backchannels and user barge-ins, placed by seeded draws.

Backchannels ("mm-hm", "right", "okay") come from the listener while the other speaker holds the
floor, at that speaker's word boundaries, pauses preferred, about `backchannels_per_minute` per
minute of the speaker's speech, never within `min_spacing` seconds of each other nor near the
listener's own words. They are words of the listener's speaker flagged `backchannel`: in the
audio and the word stream, not on the floor (the oracle ladder reads floor words only).

A barge-in: the user's next turn starts while the assistant is still talking, and the assistant
stops at the end of the word it is saying `reaction` seconds later; the words after it are not
spoken. Only an assistant turn followed by a user turn can be interrupted, and never before it
has said its answer (`protect` words). Overlaps without a cut come from the gap distributions.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Annotated, Literal, Sequence

from kame_data.config_schema import Schema
from kame_data.records import ASSISTANT, SPEAKER, USER
from kame_data.speech.limits import AtLeastZero, Range, Share

BACKCHANNELS = ("Mm-hm.", "Right.", "Okay.", "Yeah.", "I see.", "Uh-huh.", "Sure.")
Word = Annotated[str, Schema(minLength=1)]


@dataclass(frozen=True)
class TurnTakingConfig:
    """`speak.turns`: backchannels and barge-ins (both off by default)."""

    backchannels_per_minute: AtLeastZero = 0.0  # per minute of the other speaker's speech
    backchannel_words: Annotated[tuple[Word, ...], Schema(minItems=1)] = BACKCHANNELS  # what a listener says
    listeners: tuple[Literal[ASSISTANT, USER], ...] = (ASSISTANT, USER)  # the roles that backchannel
    backchannel_db: float = -4.0  # level against the listener's turns (backchannels are softer)
    min_spacing: AtLeastZero = 3.0  # seconds between two backchannels of a dialogue
    edge: AtLeastZero = 1.2  # no backchannel in a turn's first and last `edge` seconds
    barge_in_rate: Share = 0.0  # share of assistant -> user transitions where the user barges in
    reaction: Range = (0.25, 0.6)  # seconds the assistant keeps talking after the user starts

    def __post_init__(self) -> None:
        for name in ("backchannel_words", "listeners", "reaction"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        bad = set(self.listeners) - {ASSISTANT, USER}
        if bad:
            raise ValueError(f"speak.turns.listeners: unknown role {sorted(bad)[0]!r} (assistant, user)")
        if self.backchannels_per_minute < 0 or not 0 <= self.barge_in_rate <= 1:
            raise ValueError("speak.turns: rates must be >= 0 (barge_in_rate at most 1)")

    @property
    def enabled(self) -> bool:
        return self.backchannels_per_minute > 0 or self.barge_in_rate > 0


@dataclass(frozen=True)
class Slot:
    """Where a backchannel goes: the listener's speaker and the time its first word starts."""

    speaker: str
    start: float
    text: str


def _poisson(rng: random.Random, mean: float) -> int:
    """Knuth's method: small means only (a few backchannels per dialogue)."""
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def backchannel_slots(floor: Sequence[tuple[str, str, float, float]], turn_spans: Sequence[tuple[str, int, int]],
                      cfg: TurnTakingConfig, rng: random.Random) -> list[Slot]:
    """Slots for one dialogue. `floor`: (speaker, word, start, end) of every floor word in time order;
    `turn_spans`: (speaker, first index, last index + 1) of each turn's words in `floor`."""
    listeners = {SPEAKER[r] for r in cfg.listeners}
    out: list[Slot] = []
    taken: list[float] = []  # boundaries used so far (slots start a little after theirs)
    for speaker, a, b in turn_spans:
        listener = "A" if speaker == "B" else "B"
        if listener not in listeners or b - a < 2:
            continue
        t0, t1 = floor[a][2], floor[b - 1][3]
        n = _poisson(rng, cfg.backchannels_per_minute * (t1 - t0) / 60.0)
        own = [(s, e) for sp, _, s, e in floor if sp == listener]
        boundaries = []
        for i in range(a, b - 1):
            t = floor[i][3]
            pause = max(0.0, floor[i + 1][2] - t)
            if t - t0 < cfg.edge or t1 - t < cfg.edge:
                continue
            if any(s - 1.5 < t < e + 0.5 for s, e in own):  # the listener is about to speak, or just did
                continue
            boundaries.append((t, 0.02 + pause ** 2))  # pauses (commas, sentence ends) draw most
        for _ in range(n):
            free = [(t, w) for t, w in boundaries if all(abs(t - u) >= cfg.min_spacing for u in taken)]
            if not free:
                break
            u, acc = rng.random() * sum(w for _, w in free), 0.0
            pick = free[-1][0]
            for t, w in free:
                acc += w
                if u < acc:
                    pick = t
                    break
            taken.append(pick)
            out.append(Slot(listener, round(pick + rng.uniform(0.05, 0.25), 4), rng.choice(cfg.backchannel_words)))
    return sorted(out, key=lambda s: s.start)


def barge_in(spans: Sequence[tuple[float, float]], protect: int, cfg: TurnTakingConfig,
             rng: random.Random) -> tuple[int, float] | None:
    """(words the interrupted turn keeps, the gap before the user's turn: negative) or None.

    The cut falls in the last 40% of the turn's words and after its first `protect` words (the
    ones that carry the answer); the user starts `reaction` seconds before the kept words end."""
    if cfg.barge_in_rate <= 0 or rng.random() >= cfg.barge_in_rate:
        return None
    lo = max(protect, int(math.ceil(0.6 * len(spans))), 1)
    if lo >= len(spans):  # nothing left to cut after the protected words
        return None
    keep = rng.randint(lo, len(spans) - 1)
    reaction = rng.uniform(*cfg.reaction)
    return keep, -min(reaction, spans[keep - 1][1] - spans[0][0])

"""The true reply as the simulator is shown it: the words as written, with their punctuation.

The ladder reads words (docs/design.md, "Oracle events"): its context and its `hint` are words joined
by spaces, as kame_finetune's are, and stay so. The simulator's prompt is ours, though, and a small
model continues what it is shown: given "A Force The reason is that" as the start of its answer, it
went on without stops or capitals ("A Force The reason is that the newton is a unit", "It's B two
Here's why"). So the hint the prompt shows (clue words, level 4's reply, the prefilled start) is
the turn's spoken text, "A. Force. The reason is that", word for word the same words.
"""

from __future__ import annotations

from typing import Sequence

from kame_data.records import Turn, Word
from kame_data.text.tokens import spoken_tokens

# How far past the last match a word is looked for in its speaker's text: a turn cut short by a
# barge-in leaves its unsaid words behind, and the next turn's words come after them.
LOOKAHEAD = 200


def written_forms(words: Sequence[Word], turns: Sequence[Turn]) -> list[str]:
    """For each word (in the given order), the token of its speaker's spoken text it was said from,
    punctuation included; the word itself where no token matches (a backchannel, an engine's own
    word)."""
    tokens: dict[str, list[tuple[str, str]]] = {}
    for turn in turns:
        spoken = turn.spoken
        for word, at in spoken_tokens(spoken):
            end = spoken.find(" ", at)
            tokens.setdefault(turn.speaker, []).append((word, spoken[at: end if end >= 0 else len(spoken)]))
    at: dict[str, int] = {}
    out = []
    for w in words:
        mine, i = tokens.get(w.speaker, []), at.get(w.speaker, 0)
        k = next((k for k in range(i, min(len(mine), i + LOOKAHEAD)) if mine[k][0] == w.word), -1)
        if k < 0:
            out.append(w.word)
            continue
        out.append(mine[k][1])
        at[w.speaker] = k + 1
    return out

"""How close a prediction is to the true reply, and what the true reply was at each event.

Token-F1 (bag of lowercase word tokens, as in SQuAD) is crude but cheap and order-free: a good
ladder climbs from near 0 at level 0 towards 1 at level 5, where the prediction is the reply.
ROUGE-L (F1 of the longest common subsequence of the same tokens) also counts word order, so a
prediction that scatters the reply's words scores lower than one that says them in sequence.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Any, Sequence

from rapidfuzz.distance import LCSseq

_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)*")


def tokens(text: str) -> list[str]:
    """Lowercase word tokens; punctuation dropped, inner apostrophes kept ("it's")."""
    text = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'")
    return _TOKEN.findall(text)


def token_f1(prediction: str, reference: str) -> float:
    """F1 of the token multisets; 1.0 when both are empty, 0.0 when only one is."""
    p, r = tokens(prediction), tokens(reference)
    if not p or not r:
        return float(p == r)
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F1 over the same tokens as `token_f1`; 1.0 when both are empty, 0.0 when only one is."""
    p, r = tokens(prediction), tokens(reference)
    if not p or not r:
        return float(p == r)
    lcs = LCSseq.similarity(p, r)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(p), lcs / len(r)
    return 2 * precision * recall / (precision + recall)


def reply_spans(words: Sequence[dict[str, Any]], events: Sequence[dict[str, Any]]) -> list[list[int]]:
    """For each event, the indices (into `words`) of the true reply: the next speaker's next utterance.

    An event saw the first `total_word_count` words in end-time order (the reference's W); the
    reply is the next speaker's first run after them, exactly what the ladder gives as the hint,
    and defined at level 0 too, where the hint was withheld.
    """
    # floor words only (backchannels never enter the ladder), stable by end time like the ladder
    order = sorted((i for i in range(len(words)) if not words[i].get("backchannel")), key=lambda i: words[i]["end"])
    out = []
    for e in events:
        k = e["total_word_count"]
        if not 0 < k <= len(order):
            out.append([])
            continue
        current = words[order[k - 1]]["speaker"]
        j = next((i for i in range(k, len(order)) if words[order[i]]["speaker"] != current), len(order))
        span = []
        for i in order[j:]:
            if words[i]["speaker"] != words[order[j]]["speaker"]:
                break
            span.append(i)
        out.append(span)
    return out


def true_replies(words: Sequence[dict[str, Any]], events: Sequence[dict[str, Any]]) -> list[str]:
    """The true reply at each event as text (the hint itself where one was shown)."""
    return [e.get("hint") or " ".join(words[i]["word"] for i in span)
            for e, span in zip(events, reply_spans(words, events))]


def clean_text(text: str) -> str:
    """Untrusted text made safe for a terminal: control characters shown as \\xNN, never sent."""
    return "".join(c if c in "\n\t" or unicodedata.category(c) != "Cc" else f"\\x{ord(c):02x}" for c in text)


def early_truth(events: Sequence[dict[str, Any]], turns: Sequence[dict[str, Any]],
                channels: dict[str, int] | None = None) -> list[tuple[int, int]]:
    """(event index, turn index) for each level-5 event that falls inside a turn of the speaker
    being heard: the true reply handed over before that speaker has finished.

    Events carry `timestamp_ms`, `level` and `channel` (the next speaker's); turns `speaker`,
    `start` and `end` (its last word's end). An event at t is inside a turn when start <= t < end:
    the turn's last word has not ended yet, so it was not among the words the event saw.
    """
    channels = channels or {"A": 0, "B": 1}
    out = []
    for i, e in enumerate(events):
        if e["level"] != 5:
            continue
        t = e["timestamp_ms"] / 1000
        for k, turn in enumerate(turns):
            if channels[turn["speaker"]] != e["channel"] and turn["start"] <= t < turn["end"]:
                out.append((i, k))
                break
    return out

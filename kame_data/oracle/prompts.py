"""Simulator prompts per hint level, and the cleaning that turns model output into spoken text."""

from __future__ import annotations

import re

from kame_data.llm.base import ChatRequest
from kame_data.oracle.ladder import Step

ROLE_NAMES = {"A": "the assistant", "B": "the user"}

LEVEL_INSTRUCTIONS = {
    0: "No hint is available. Predict the reply from the conversation alone.",
    1: "You may use keywords from the hint, but follow the flow of the conversation.",
    2: "Refer to the hint, but include content that differs from it.",
    3: "The hint is an important clue, but do not copy it word for word.",
    4: "Use the hint rather directly.",
    5: "The hint is exactly what will be said: give it as the reply.",
}

MIN_WORDS, MAX_WORDS = 3, 30


def build_request(step: Step, max_tokens: int, temperature: float, seed: int) -> ChatRequest:
    """The simulator request for a step below level 5 (level 5 needs no call: the hint is the answer)."""
    who = step.next_speaker
    system = (
        f"You predict what speaker {who} ({ROLE_NAMES.get(who, 'the other speaker')}) will say next in a "
        f"spoken conversation. Reply with only {who}'s words: one or two short spoken sentences, "
        f"10 to 30 words, no lists, no quotes, no markup."
    )
    user = f"Conversation so far:\n{step.conversation_context}\n\n{LEVEL_INSTRUCTIONS[step.level]}"
    if step.level >= 1:
        user += f"\nHint: {step.true_reply}"
    user += f"\n\nWhat does {who} say next?"
    return ChatRequest(messages=(("system", system), ("user", user)), max_tokens=max_tokens,
                       temperature=temperature, seed=seed)


_LABEL = re.compile(r"^\s*(?:(?:speaker\s+)?[AB]|assistant|user|answer|hint|response|reply)\s*(?:says|said)?\s*[:,-]?\s+",
                    re.IGNORECASE)
_OTHER_LINE = re.compile(r"^\s*(?:speaker\s+)?[AB]\s*:", re.IGNORECASE)


def clean_prediction(text: str) -> str:
    """Model output -> short spoken text: no labels, quotes, markup or lists; at most 30 words."""
    lines = [ln for ln in text.replace("\r", "").split("\n")]
    kept: list[str] = []
    for i, ln in enumerate(lines):
        if i > 0 and _OTHER_LINE.match(ln):
            break  # the model went on to write the other speaker's turn
        ln = re.sub(r"^\s*(?:[-*•>#]+|\d+[.)])\s*", "", ln)
        if ln.strip():
            kept.append(ln.strip())
    out = " ".join(kept)
    for _ in range(2):
        out = _LABEL.sub("", out)
    out = re.sub(r"[*_`#<>\[\]{}|\"“”]", "", out)
    out = re.sub(r"\s+", " ", out).strip().strip("'").strip()
    words = out.split()
    if len(words) > MAX_WORDS:
        clipped = " ".join(words[:MAX_WORDS])
        cut = max(clipped.rfind(". "), clipped.rfind("? "), clipped.rfind("! "))
        out = clipped[: cut + 1] if cut > 0 and len(clipped[: cut + 1].split()) >= 10 else clipped
    return out


def usable(prediction: str) -> bool:
    return len(prediction.split()) >= MIN_WORDS

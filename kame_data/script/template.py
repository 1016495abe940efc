"""Template scripts: the user asks the item's question, the assistant answers conversationally."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from kame_data.records import ASSISTANT, USER, Dialogue, Reject, SourceItem, Turn
from kame_data.script.normalize import spoken_words, to_spoken
from kame_data.sources.common import LETTERS

SPEAKER = {ASSISTANT: "A", USER: "B"}


@dataclass(frozen=True)
class ScriptConfig:
    style: str = "template"
    mmlu_options: str = "subset"  # all | subset (answer + distractors) | open (no options read)
    max_options: int = 4
    variants: int = 1
    max_explanation_words: int = 40


_OPENERS = ("", "Quick question. ", "Okay, here's one. ", "Can you help me with this? ", "I have a question. ")
_MC_CLOSERS = ("Is it {choices}?", "Which is it: {choices}?", "The options are {choices}.")
_MC_ANSWERS = ("It's {letter}, {answer}.", "The answer is {letter}, {answer}.", "I'd go with {letter}, {answer}.")
_OPEN_ANSWERS = ("The answer is {answer}.", "It's {answer}.")
_BECAUSE = ("That's because {why}", "Here's why: {why}")


def _choices(letters_and_texts: list[tuple[str, str]]) -> str:
    parts = [f"{letter}, {text.rstrip('.')}" for letter, text in letters_and_texts]
    return "; ".join(parts[:-1]) + f"; or {parts[-1]}" if len(parts) > 1 else parts[0]


def _clip_words(text: str, limit: int) -> str:
    """The leading whole sentences of `text` that fit in `limit` words (at least the first sentence, clipped)."""
    sentences = re.split(r"(?<=[.!?])\s+", text.strip())
    out: list[str] = []
    for s in sentences:
        if len((" ".join(out + [s])).split()) > limit:
            break
        out.append(s)
    if not out and sentences and sentences[0]:
        out = [" ".join(sentences[0].split()[:limit]).rstrip(",;:") + "."]
    return " ".join(out)


def _multiple_choice(item: SourceItem, cfg: ScriptConfig, rng: random.Random) -> tuple[str, str]:
    answer_idx = LETTERS.index(item.answer_letter[0])
    indices = list(range(len(item.options)))
    if cfg.mmlu_options == "subset" and len(indices) > cfg.max_options and "," not in item.answer_letter:
        distractors = [i for i in indices if i != answer_idx]
        indices = sorted([answer_idx] + rng.sample(distractors, cfg.max_options - 1))
    opener = rng.choice(_OPENERS)
    if cfg.mmlu_options == "open" and "," not in item.answer_letter:
        user = f"{opener}{item.question}"
        assistant = rng.choice(_OPEN_ANSWERS).format(answer=item.answer.rstrip("."))
    else:
        shown = [(LETTERS[pos], item.options[i]) for pos, i in enumerate(indices)]
        letter = ",".join(LETTERS[indices.index(LETTERS.index(a))] for a in item.answer_letter.split(","))
        user = f"{opener}{item.question} " + rng.choice(_MC_CLOSERS).format(choices=_choices(shown))
        assistant = rng.choice(_MC_ANSWERS).format(letter=letter.replace(",", " and "), answer=item.answer.rstrip("."))
    if item.explanation:
        why = _clip_words(item.explanation, cfg.max_explanation_words)
        if why:
            assistant += " " + rng.choice(_BECAUSE).format(why=why[0].lower() + why[1:])
    return user, assistant


def _word_problem(item: SourceItem, cfg: ScriptConfig, rng: random.Random) -> tuple[str, str]:
    user = rng.choice(_OPENERS) + item.question
    steps = _clip_words(item.explanation, cfg.max_explanation_words) if item.explanation else ""
    assistant = f"{steps} So the answer is {item.answer}.".strip()
    return user, assistant


def script_item(item: SourceItem, variant: int, cfg: ScriptConfig, seed: int) -> Dialogue | Reject:
    """One spoken-style dialogue for `item`; deterministic in (seed, item id, variant)."""
    dialogue_id = f"{item.id}-v{variant}"
    rng = random.Random(f"{seed}:{dialogue_id}")
    if item.answer_letter:
        user, assistant = _multiple_choice(item, cfg, rng)
    else:
        user, assistant = _word_problem(item, cfg, rng)
    turns = []
    for role, text in ((USER, user), (ASSISTANT, assistant)):
        spoken = to_spoken(text)
        if not spoken_words(spoken):
            return Reject("script", dialogue_id, "empty_after_normalisation", f"{role} turn has no speakable words")
        if re.search(r"[0-9$\\]|<<|####", spoken):
            return Reject("script", dialogue_id, "unspeakable_text", f"{role} turn keeps symbols: {spoken[:80]!r}")
        turns.append(Turn(role=role, speaker=SPEAKER[role], text=" ".join(text.split()), spoken=spoken))
    return Dialogue(id=dialogue_id, item_id=item.id, source=item.source, category=item.category,
                    variant=variant, turns=turns)


def script_batch(items: list[SourceItem], cfg: ScriptConfig, seed: int) -> list[Dialogue | Reject]:
    """The script stage: every item times `cfg.variants`."""
    return [script_item(item, v, cfg, seed) for item in items for v in range(cfg.variants)]

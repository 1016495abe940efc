"""Template scripts: the user asks the item's question, the assistant answers conversationally.

Every dialogue is deterministic in (seed, item id, variant). Each phrase pool is rotated by the
variant number from a per-item starting point, so the variants of one item differ in wording
(opener, how the options are offered, how the answer and its reason are phrased), and the
MMLU-Pro options read in `subset` mode are drawn again for each variant.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field

from kame_data.llm.config import BackendConfig
from kame_data.records import (
    ASSISTANT,
    LETTERS,
    SPEAKER,
    USER,
    Dialogue,
    Reject,
    SourceItem,
    Turn,
)
from kame_data.text import is_speakable, spoken_words, to_spoken


@dataclass(frozen=True)
class LlmScriptConfig:
    """`script.llm`: the rewrite model (same backends and cache as the oracle) and its limits."""

    backend: BackendConfig = field(default_factory=BackendConfig)
    max_tokens: int = 400  # per request; the backend's own max_tokens is the oracle's, not ours
    temperature: float = 0.8
    retries: int = 1  # further attempts (new seed) before falling back to the template
    max_user_words: int = 90
    max_assistant_words: int = 80


@dataclass(frozen=True)
class ScriptConfig:
    style: str = "template"  # template | llm (an LLM rewrites each template dialogue; template on failure)
    mmlu_options: str = "subset"  # all | subset (answer + distractors) | open (no options read)
    max_options: int = 4
    variants: int = 1  # dialogues per item, unless the source's sampling set `item.variants`
    max_explanation_words: int = 40
    followup_rate: float = 0.0  # share of dialogues whose reason comes as a follow-up ("Why is that?")
    llm: LlmScriptConfig = field(default_factory=LlmScriptConfig)


_OPENERS = ("", "Quick question. ", "Okay, here's one. ", "Can you help me with this? ", "I have a question. ",
            "Let me ask you something. ", "Here's a tricky one. ")
_CLOSERS = ("Is it {choices}?", "Which is it: {choices}?", "Would it be {choices}?", "The options are {choices}.",
            "My choices are {choices}.")
_MC_ANSWERS = ("It's {letter}, {answer}.", "The answer is {letter}, {answer}.", "I'd go with {letter}, {answer}.",
               "That would be {letter}: {answer}.", "{letter}. {answer}.")
_OPEN_ANSWERS = ("The answer is {answer}.", "It's {answer}.", "That would be {answer}.", "I'd say {answer}.")
_BECAUSE = ("That's because {why}", "Here's why: {why}", "The reason is that {why}", "You see, {why}")
_RESULTS = ("So the answer is {result}.", "That gives {result}.", "So it comes to {result}.",
            "Which makes {result}.")
_WHY = ("Why is that?", "How do you know?", "Can you explain why?", "How did you get that?", "What's the reasoning?")


def _rotate(pool: tuple[str, ...], item_id: str, name: str, seed: int, variant: int) -> str:
    """The variant-th phrase of a pool, starting from a per-item offset: variants differ."""
    start = int(hashlib.sha256(f"{seed}:{item_id}:{name}".encode()).hexdigest()[:8], 16)
    return pool[(start + variant) % len(pool)]


def _choices(letters_and_texts: list[tuple[str, str]]) -> str:
    parts = [f"{letter}, {text.rstrip('.')}" for letter, text in letters_and_texts]
    return "; ".join(parts[:-1]) + f"; or {parts[-1]}" if len(parts) > 1 else parts[0]


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if s]


def clip_words(text: str, limit: int, from_end: bool = False) -> str:
    """Whole sentences of `text` within `limit` words: the leading ones (or, with `from_end`, the
    trailing ones, which lead to a worked result); the first sentence clipped if none fits."""
    sentences = _sentences(text)
    if from_end:
        sentences = sentences[::-1]
    out: list[str] = []
    for s in sentences:
        if len(" ".join(out + [s]).split()) > limit:
            break
        out.append(s)
    if not out and sentences:
        if from_end:  # a cut step would not reach the result: take it whole if not too long
            return sentences[0] if len(sentences[0].split()) <= 2 * limit else ""
        out = [" ".join(sentences[0].split()[:limit]).rstrip(",;:") + "."]
    return " ".join(out[::-1] if from_end else out)


def ask(question: str) -> str:
    """The question as a person would put it: blanks like '( )' turned into words."""
    q = " ".join(question.split())
    q = re.sub(r"(?<=[?.!])\s*(?:\(\s*\)|（\s*）|_{2,})\s*$", "", q)
    q = re.sub(r"\s*(?:\(\s*\)|（\s*）|_{2,})\s*[.。]?\s*$", " what?", q)  # "... was ( )." -> "... was what?"
    q = re.sub(r"\s*(?:\(\s*\)|（\s*）|_{2,})\s*", " blank ", q).strip()
    return q[:1].upper() + q[1:]


def _lower_first(text: str) -> str:
    if len(text) > 1 and text[0].isupper() and not text[1].isupper() and not text.startswith("I "):
        return text[0].lower() + text[1:]
    return text


def _speakable(text: str) -> bool:
    return bool(text) and is_speakable(to_spoken(text))


def _why(item: SourceItem, cfg: ScriptConfig) -> str:
    """The reason to give, clipped to a spoken length; '' when there is none or it is not speakable
    (e.g. a chain of thought full of LaTeX)."""
    if not item.explanation:
        return ""
    why = clip_words(item.explanation, cfg.max_explanation_words)
    return why if _speakable(why) and len(spoken_words(to_spoken(why))) <= 2 * cfg.max_explanation_words else ""


def _open_answer(answer: str, pick) -> str:
    """A bare reference answer ('19%', '5pi') said as a reply; a full sentence stays as it is."""
    answer = answer.strip()
    if len(answer.split()) <= 3 and not re.search(r"\b(?:is|are|was|were)\b|=", answer):
        return pick(_OPEN_ANSWERS, "open").format(answer=answer.rstrip("."))
    return answer


def _option(text: str, question: str) -> str:
    """An option as said: '213' over a numbered list in the question is 'two, one, three'."""
    if re.fullmatch(r"\d{2,6}", text) and re.search(r"(?<![\w(])1[).]\s", question):
        return ", ".join(text)
    return text


def _multiple_choice(item: SourceItem, cfg: ScriptConfig, rng: random.Random, pick) -> tuple[str, str]:
    """(user turn, assistant answer) for an item with options."""
    answers = item.answer_letter.split(",")
    indices = list(range(len(item.options)))
    if cfg.mmlu_options == "subset" and len(indices) > cfg.max_options:
        keep = [LETTERS.index(a) for a in answers]
        distractors = [i for i in indices if i not in keep]
        indices = sorted(keep + rng.sample(distractors, max(0, cfg.max_options - len(keep))))
    opener = pick(_OPENERS, "opener")
    question = ask(item.question)
    if cfg.mmlu_options == "open" and len(answers) == 1:
        return f"{opener}{question}", pick(_OPEN_ANSWERS, "answer").format(answer=item.answer.rstrip("."))
    shown = [(LETTERS[pos], _option(item.options[i], item.question)) for pos, i in enumerate(indices)]
    letters = [LETTERS[indices.index(LETTERS.index(a))] for a in answers]
    question = question[:-1].rstrip() if question.endswith(":") else question
    joiner = "" if question.endswith(("?", ".", "!")) else "..."
    user = f"{opener}{question}{joiner} " + pick(_CLOSERS, "closer").format(choices=_choices(shown))
    letter = " and ".join(letters)
    said = " and ".join(_option(item.options[LETTERS.index(a)], item.question) for a in answers)
    answer = pick(_MC_ANSWERS, "answer").format(letter=letter, answer=said.rstrip("."))
    return user, answer


_MONEY_QUESTION = re.compile(r"\b(?:how much|cost|costs|spend|spent|pay|paid|earn|earned|make|made|save|saved|"
                             r"price|worth|charge|owe|profit|money|pension|salary|income|wage|revenue|budget|fee|"
                             r"bill|tip|dollars)\b", re.IGNORECASE)
_HOW_MANY = re.compile(r"\bhow many (?:more |fewer |less |of (?:the|her|his|their) )?([a-z]+)", re.IGNORECASE)


def result_phrase(item: SourceItem) -> str:
    """The final answer with its unit when the question makes it clear ('18 dollars', '3 bolts')."""
    answer = item.answer
    q = item.question
    if re.fullmatch(r"-?[\d,]*\.?\d+", answer):
        if re.search(r"\bwhat percent(?:age)?\b", q, re.IGNORECASE):
            return f"{answer}%"
        if re.search(r"\$|\bdollars?\b", q) and _MONEY_QUESTION.search(q):
            return f"${answer}"
        m = _HOW_MANY.search(q)
        if m and answer != "1" and m.group(1).endswith("s") and m.group(1).lower() not in ("times", "does", "is"):
            return f"{answer} {m.group(1)}"
    return answer


def _word_problem(item: SourceItem, cfg: ScriptConfig, pick) -> tuple[str, str, str]:
    """(user turn, result sentence, worked steps) for an open item with a solution (GSM8K). The
    steps kept are the last ones that fit: they are the ones that reach the result."""
    user = pick(_OPENERS, "opener") + ask(item.question)
    steps = clip_words(item.explanation, cfg.max_explanation_words, from_end=True)
    if not _speakable(steps):
        steps = ""
    return user, pick(_RESULTS, "result").format(result=result_phrase(item)), steps


def script_turns(item: SourceItem, variant: int, cfg: ScriptConfig, seed: int) -> list[tuple[str, str]] | str:
    """The (role, display text) turns of one template dialogue, or a reject reason."""
    dialogue_id = f"{item.id}-v{variant}"
    rng = random.Random(f"{seed}:{dialogue_id}")

    def pick(pool: tuple[str, ...], name: str) -> str:
        return _rotate(pool, item.id, name, seed, variant)

    if not item.answer:
        return "no_reference_answer"
    steps = ""
    if item.options:
        user, answer = _multiple_choice(item, cfg, rng, pick)
        why = _why(item, cfg)
    elif item.explanation:
        user, answer, why = _word_problem(item, cfg, pick)
        steps = why
    else:
        user, answer, why = pick(_OPENERS, "opener") + ask(item.question), _open_answer(item.answer, pick), ""
    turns = [(USER, user)]
    followup = bool(why) and cfg.followup_rate > 0 and rng.random() < cfg.followup_rate
    if why and not followup:
        # a worked solution comes first and ends in the result; a reason follows the answer
        answer = f"{steps} {answer}" if steps else answer + " " + pick(_BECAUSE, "because").format(why=_lower_first(why))
    turns.append((ASSISTANT, answer))
    if followup:
        turns += [(USER, pick(_WHY, "why")), (ASSISTANT, why)]
    for k, f in enumerate(item.followups):  # MT-Bench's second turn; stops at the first without an answer
        if not f.answer:
            break
        turns += [(USER, f.question), (ASSISTANT, _open_answer(f.answer, lambda pool, name: pick(pool, f"{name}{k}")))]
    return turns


def to_dialogue(item: SourceItem, variant: int, turns: list[tuple[str, str]]) -> Dialogue | Reject:
    """Display turns -> a Dialogue with spoken text side by side, or a Reject naming the turn."""
    dialogue_id = f"{item.id}-v{variant}"
    out = []
    for k, (role, text) in enumerate(turns):
        text = " ".join(text.split())
        spoken = to_spoken(text)
        if not spoken_words(spoken):
            return Reject("script", dialogue_id, "empty_after_normalisation", f"turn {k} ({role}) has no speakable words")
        if not is_speakable(spoken):
            return Reject("script", dialogue_id, "unspeakable_text", f"turn {k} ({role}) keeps symbols: {spoken[:80]!r}")
        out.append(Turn(role=role, speaker=SPEAKER[role], text=text, spoken=spoken))
    return Dialogue(id=dialogue_id, item_id=item.id, source=item.source, category=item.category,
                    variant=variant, turns=out, answer=answer_key(item))


MAX_KEY_WORDS = 12  # a longer free-text answer is an essay, not a phrase a transcript can be matched against


def answer_key(item: SourceItem) -> list[str]:
    """Spoken forms of the item's answer that the rendered assistant must still say (speech/answer.py):
    the option letters and texts of a multiple-choice item, else the result phrase and the answer."""
    if not item.answer:
        return []
    if item.options:
        letters = [a for a in item.answer_letter.split(",") if a and LETTERS.index(a) < len(item.options)]
        forms = letters + [to_spoken(_option(item.options[LETTERS.index(a)], item.question)) for a in letters]
    else:
        forms = [to_spoken(result_phrase(item)), to_spoken(item.answer)]
    return list(dict.fromkeys(f for f in forms if 0 < len(spoken_words(f)) <= MAX_KEY_WORDS))


def script_item(item: SourceItem, variant: int, cfg: ScriptConfig, seed: int) -> Dialogue | Reject:
    """One spoken-style dialogue for `item`; deterministic in (seed, item id, variant)."""
    turns = script_turns(item, variant, cfg, seed)
    if isinstance(turns, str):
        return Reject("script", f"{item.id}-v{variant}", turns, "the item has no answer to speak (template style)")
    return to_dialogue(item, variant, turns)


def variant_count(item: SourceItem, cfg: ScriptConfig) -> int:
    return item.variants or cfg.variants


def script_batch(items: list[SourceItem], cfg: ScriptConfig, seed: int) -> list[Dialogue | Reject]:
    """The template script stage: every item times its number of variants."""
    return [script_item(item, v, cfg, seed) for item in items for v in range(variant_count(item, cfg))]


def say_result(item: SourceItem) -> str:
    """The spoken form of an item's answer, used to check that a rewrite kept it."""
    return to_spoken(result_phrase(item)) if item.answer else ""


"""Template scripts: the user asks the item's question, the assistant answers conversationally.

Every dialogue is deterministic in (seed, item id, variant). Each phrase pool is rotated by the
variant number from a per-item starting point, so the variants of one item differ in wording
(opener, how the options are offered, how the answer and its reason are phrased), and the
MMLU-Pro options read in `subset` mode are drawn again for each variant.

A worked solution (GSM8K) is explained the way a person would: its sentences from the start, each
calculation said as its result (kame_data/script/solution.py), and the final answer said once, with
the unit the question asks for (kame_data/script/answer.py). Every turn fits `max_turn_seconds`: a
user turn reads fewer options (always with the answer) until it fits, or the dialogue is refused
`too_long`.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from dataclasses import dataclass, replace

from kame_data.records import (
    ASSISTANT,
    LETTERS,
    MAX_RUN_WORDS,
    SPEAKER,
    USER,
    Dialogue,
    Reject,
    SourceItem,
    Turn,
)
from kame_data.script.answer import Target, answer_lost, answer_positions, choice_target, open_target, states
from kame_data.script.config import ScriptConfig
from kame_data.script.solution import lead
from kame_data.text import is_speakable, spoken_seconds, spoken_words, to_spoken
from kame_data.text.inventory import inventory_problem


_OPENERS = ("", "Quick question. ", "Okay, here's one. ", "Can you help me with this? ", "I have a question. ",
            "Let me ask you something. ", "Here's a tricky one. ")
_CLOSERS = ("Is it {choices}?", "Which is it: {choices}?", "Would it be {choices}?", "The options are {choices}.",
            "My choices are {choices}.")
_MC_ANSWERS = ("It's {letter}, {answer}.", "The answer is {letter}, {answer}.", "I'd go with {letter}, {answer}.",
               "That would be {letter}: {answer}.", "{letter}. {answer}.")
_OPEN_ANSWERS = ("The answer is {answer}.", "It's {answer}.", "That would be {answer}.", "I'd say {answer}.")
_BECAUSE = ("That's because {why}", "Here's why: {why}", "The reason is that {why}", "You see, {why}")
# The last sentence of a whole worked solution, when it does not already say the answer.
_RESULTS = ("So the answer is {result}.", "So that's {result}.", "That comes to {result}.", "So it's {result}.")
# After a solution cut short: the answer, without pretending the steps were all said.
_RESULTS_AFTER = ("Working it through from there, it comes to {result}.",
                  "Carrying on like that, you end up with {result}.",
                  "Following it through, the answer is {result}.",
                  "In the end, that gives {result}.")
_LEAD_INS = ("", "Let's see. ", "Okay. ", "Sure. ", "Alright. ")
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


def _why(item: SourceItem, cfg: ScriptConfig, letters: dict[str, str] | None = None) -> str:
    """The reason to give, clipped to a spoken length; '' when there is none or it is not speakable
    (e.g. a chain of thought full of LaTeX). Option letters it names ('(H)') are the ones the
    dialogue shows, or dropped when that option is not read."""
    if not item.explanation:
        return ""
    why = clip_words(item.explanation, cfg.max_explanation_words)
    if letters is not None:
        why = re.sub(r"\(([A-J])\)", lambda m: f"({letters[m.group(1)]})" if m.group(1) in letters else "", why)
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


def seconds(text: str, cfg: ScriptConfig) -> float:
    """About how long display text takes to say."""
    return spoken_seconds(to_spoken(text), cfg.words_per_second)


def _user_fits(text: str, cfg: ScriptConfig) -> bool:
    """A user turn within `max_turn_seconds` and within MAX_RUN_WORDS spoken words (a longer run
    gets the true reply from the oracle ladder before its last word); any turn with no limit (the
    plain version a rewrite condenses, `unfitted`)."""
    if math.isinf(cfg.max_turn_seconds):
        return True
    return seconds(text, cfg) <= cfg.max_turn_seconds and len(spoken_words(to_spoken(text))) <= MAX_RUN_WORDS


def _too_long(text: str, cfg: ScriptConfig, user: bool = True) -> str:
    words = len(spoken_words(to_spoken(text)))
    if user and words > MAX_RUN_WORDS:
        return f"{words} words > {MAX_RUN_WORDS} (the oracle ladder would give the reply before its last word)"
    return f"about {seconds(text, cfg):.0f} s > {cfg.max_turn_seconds:.0f} s"


@dataclass(frozen=True)
class Script:
    """A template dialogue's (role, display text) turns and the answer its assistant must carry."""

    turns: list[tuple[str, str]]
    target: Target
    shown: tuple[tuple[str, str], ...] = ()  # the options read, with the letters the dialogue gives them


def _multiple_choice(item: SourceItem, cfg: ScriptConfig, rng: random.Random, pick, keep: list[int]) -> tuple | str:
    """(user turn, assistant answer, original letter -> shown letter, options read) for an item with
    options (`keep`: the answer's), or why it cannot be asked within `max_turn_seconds`. Options
    are dropped (never the answer) until the question with its options fits.

    The options read are lettered A, B, C, ... in the item's order, so at most 26 are read however
    many the item has: the answer always, then the others `mmlu_options` picks (`subset`: up to
    `max_options` in all, drawn at random; `all`: the first in the item's order). An option past
    Z has no letter of its own in the item: it is read under the letter of its place among those
    read, and an explanation cannot name it."""
    answers = [LETTERS[i] for i in keep]
    distractors = [i for i in range(len(item.options)) if i not in keep]
    order = rng.sample(distractors, len(distractors)) if cfg.mmlu_options == "subset" else distractors
    room = len(LETTERS) - len(keep)  # every option read needs a letter
    n = min(len(distractors), max(0, cfg.max_options - len(keep)), room) if cfg.mmlu_options == "subset" \
        else min(len(distractors), room)
    opener = pick(_OPENERS, "opener")
    question = ask(item.question)
    closer = pick(_CLOSERS, "closer")
    if cfg.mmlu_options == "open" and len(answers) == 1:
        user = _fit(opener, question, cfg)
        if not _user_fits(user, cfg):
            return f"question: {_too_long(user, cfg)}"
        return user, pick(_OPEN_ANSWERS, "answer").format(answer=item.answer.rstrip(".")), {}, ()
    question = question[:-1].rstrip() if question.endswith(":") else question
    joiner = "" if question.endswith(("?", ".", "!")) else "..."
    chosen = order[:n]
    # fewer options until the turn fits, the longest dropped first; at the end the shortest other one
    subsets = [sorted(chosen, key=lambda i: len(item.options[i]))[:k] for k in range(n, 0, -1)] or [[]]
    if distractors:
        subsets.append([min(distractors, key=lambda i: len(item.options[i]))])
    for subset, lead in [(subset, opener) for subset in subsets] + [(subsets[-1], "")]:  # last: no opener
        indices = sorted(keep + subset)
        shown = [(LETTERS[pos], _option(item.options[i], item.question)) for pos, i in enumerate(indices)]
        user = f"{lead}{question}{joiner} " + closer.format(choices=_choices(shown))
        if _user_fits(user, cfg):
            break
    else:
        return f"question with {len(indices)} options: {_too_long(user, cfg)}"
    relabel = {LETTERS[i]: LETTERS[pos] for pos, i in enumerate(indices) if i < len(LETTERS)}
    letter = " and ".join(relabel[a] for a in answers)
    said = " and ".join(_option(item.options[i], item.question) for i in keep)
    answer = pick(_MC_ANSWERS, "answer").format(letter=letter, answer=said.rstrip("."))
    return user, answer, relabel, tuple(shown)


def _fit(opener: str, question: str, cfg: ScriptConfig) -> str:
    """The question with its opener, or without it when the opener would make the turn too long."""
    user = f"{opener}{question}"
    return user if _user_fits(user, cfg) else question


def _word_problem(item: SourceItem, cfg: ScriptConfig, pick) -> tuple[str, str, str]:
    """(user turn, explanation, closing sentence) for an open item with a worked solution (GSM8K):
    whole sentences from the start of the solution with each calculation said as its result, then
    the answer with its unit unless the last sentence kept already says it."""
    target = open_target(item)
    user = _fit(pick(_OPENERS, "opener"), ask(item.question), cfg)
    limit = cfg.max_explanation_words
    while True:
        kept, complete = lead(item.explanation, limit)
        steps = " ".join(kept)
        if steps and not _speakable(steps):
            kept, complete, steps = [], False, ""
        if complete and kept and states(target, kept[-1]):
            closer = ""
        elif kept:
            closer = pick(_RESULTS if complete else _RESULTS_AFTER, "result").format(result=target.text)
        else:
            closer = pick(_OPEN_ANSWERS, "answer").format(answer=target.text)
        lead_in = pick(_LEAD_INS, "lead_in") if steps else ""
        answer = f"{lead_in}{steps} {closer}".strip()
        if seconds(answer, cfg) <= cfg.max_turn_seconds or not kept:
            return user, answer, steps  # still too long without steps: script_turns refuses it `too_long`
        limit //= 2  # at 0 no step is kept: the loop ends even when the answer alone is too long


def script_turns(item: SourceItem, variant: int, cfg: ScriptConfig, seed: int) -> Script | Reject:
    """The turns of one template dialogue and the answer it carries, or a Reject."""
    dialogue_id = f"{item.id}-v{variant}"
    rng = random.Random(f"{seed}:{dialogue_id}")

    def pick(pool: tuple[str, ...], name: str) -> str:
        return _rotate(pool, item.id, name, seed, variant)

    if not item.answer:
        return Reject("script", dialogue_id, "no_reference_answer", "the item has no answer to speak (template style)")
    steps, shown = "", ()
    if item.options:
        keep = answer_positions(item)
        if keep is None:
            return Reject("script", dialogue_id, "malformed_answer",
                          f"answer letter {item.answer_letter[:20]!r} names none of the {len(item.options)} options")
        asked = _multiple_choice(item, cfg, rng, pick, keep)
        if isinstance(asked, str):
            return Reject("script", dialogue_id, "too_long", asked)
        user, answer, relabel, shown = asked
        target = choice_target(item, [relabel[LETTERS[i]] for i in keep] if shown else [])
        why = _why(item, cfg, relabel)
    elif item.explanation:
        user, answer, steps = _word_problem(item, cfg, pick)
        target, why = open_target(item), steps
    else:
        target = open_target(item)
        user, answer, why = _fit(pick(_OPENERS, "opener"), ask(item.question), cfg), _open_answer(target.text, pick), ""
    turns = [(USER, user)]
    followup = bool(why) and not steps and cfg.followup_rate > 0 and rng.random() < cfg.followup_rate
    if why and not steps and not followup:  # a reason follows the answer (a worked solution already leads to it)
        with_why = answer + " " + pick(_BECAUSE, "because").format(why=_lower_first(why))
        answer = with_why if seconds(with_why, cfg) <= cfg.max_turn_seconds else answer
    turns.append((ASSISTANT, answer))
    if followup:
        turns += [(USER, pick(_WHY, "why")), (ASSISTANT, why)]
    for k, f in enumerate(item.followups):  # MT-Bench's second turn; stops at the first without an answer
        if not f.answer:
            break
        said = open_target(replace(item, question=f.question, answer=f.answer, explanation="")).text
        turns += [(USER, f.question), (ASSISTANT, _open_answer(said, lambda pool, name: pick(pool, f"{name}{k}")))]
    for k, (role, text) in enumerate(turns):
        if not (_user_fits(text, cfg) if role == USER else seconds(text, cfg) <= cfg.max_turn_seconds):
            return Reject("script", dialogue_id, "too_long", f"turn {k} ({role}): {_too_long(text, cfg, role == USER)}")
    return Script(turns, target, shown)


def unfitted(item: SourceItem, variant: int, cfg: ScriptConfig, seed: int) -> Script | Reject:
    """The template dialogue with no length limit and the fewest options (the answer and one other):
    the plain version an LLM rewrite condenses when the template cannot fit the item (script/llm.py)."""
    options = "open" if cfg.mmlu_options == "open" else "subset"
    return script_turns(item, variant, replace(cfg, max_turn_seconds=math.inf, max_options=2, mmlu_options=options),
                        seed)


def to_dialogue(item: SourceItem, variant: int, turns: list[tuple[str, str]],
                target: Target | None = None) -> Dialogue | Reject:
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
        problem = inventory_problem(text, spoken)  # every sign said, nothing misread (text/inventory.py)
        if problem is not None:
            return Reject("script", dialogue_id, problem.reason, f"turn {k} ({role}): {problem.detail}")
        out.append(Turn(role=role, speaker=SPEAKER[role], text=text, spoken=spoken))
    return Dialogue(id=dialogue_id, item_id=item.id, source=item.source, category=item.category,
                    variant=variant, turns=out, answer=answer_key(item, target))


MAX_KEY_WORDS = 12  # a longer free-text answer is an essay, not a phrase a transcript can be matched against
# An option's text is said whole after its letter, so a long one is still matched (most of its words in
# order): when Whisper misses the letter ("That would be B" heard "would be the"), the text still counts.
MAX_OPTION_KEY_WORDS = 40


def answer_key(item: SourceItem, target: Target | None = None) -> list[str]:
    """Spoken forms of the item's answer that the rendered assistant must still say (speech/answer.py):
    the option letters as the dialogue shows them and the option texts of a multiple-choice item,
    else the answer with its unit and the bare answer. `target`: the script's (letters relabelled
    by the options read); by default the item's own."""
    if not item.answer:
        return []
    if item.options:
        positions = answer_positions(item) or []
        target = target or choice_target(item, [LETTERS[i] for i in positions])
        letters = [a for a in target.letter.split(" and ") if a]
        texts = [to_spoken(_option(item.options[i], item.question)) for i in positions]
        forms = letters + [t for t in texts if 0 < len(spoken_words(t)) <= MAX_OPTION_KEY_WORDS]
    else:
        target = target or open_target(item)
        texts = [to_spoken(target.text), to_spoken(item.answer)]
        forms = [f for f in texts if 0 < len(spoken_words(f)) <= MAX_KEY_WORDS]
    return list(dict.fromkeys(forms))


def checked_dialogue(item: SourceItem, variant: int, script: Script) -> Dialogue | Reject:
    """The template dialogue, refused `answer_lost` if its assistant turn does not carry the answer
    (kame_data/script/answer.py; the same check as an LLM rewrite's)."""
    dialogue = to_dialogue(item, variant, script.turns, script.target)
    if isinstance(dialogue, Dialogue):
        lost = answer_lost(script.target, dialogue.turns[1].spoken)
        if lost:
            return Reject("script", dialogue.id, "answer_lost", f"template assistant turn: {lost}")
    return dialogue


def script_item(item: SourceItem, variant: int, cfg: ScriptConfig, seed: int) -> Dialogue | Reject:
    """One spoken-style dialogue for `item`; deterministic in (seed, item id, variant)."""
    script = script_turns(item, variant, cfg, seed)
    return script if isinstance(script, Reject) else checked_dialogue(item, variant, script)


def variant_numbers(item: SourceItem, cfg: ScriptConfig) -> list[int]:
    """The variants to script: the ones the allocation chose (sources/allocate.py), else the first
    `item.variants` (or the config's count)."""
    return list(item.variant_numbers) or list(range(item.variants or cfg.variants))


# What an LLM rewrite does with a template refusal: too long, it condenses (script/llm.py); no
# reference answer, the model answers itself. Any other refusal stands in both styles.
REWRITE_TAKES = ("too_long", "no_reference_answer")


def verdict(cfg: ScriptConfig, seed: int):
    """The script step's verdict on a variant of an item, for the allocation (sources/allocate.py):
    its Reject, or None when the step would script it. The template style runs the very function
    the step runs, so nothing handed out is refused later; the LLM style refuses what the template
    refuses except what a rewrite takes on (REWRITE_TAKES), whose fate is the rewrite's."""
    def template(item: SourceItem, variant: int) -> Reject | None:
        out = script_item(item, variant, cfg, seed)
        return out if isinstance(out, Reject) else None

    def rewrite(item: SourceItem, variant: int) -> Reject | None:
        out = script_turns(item, variant, cfg, seed)
        return out if isinstance(out, Reject) and out.reason not in REWRITE_TAKES else None

    return rewrite if cfg.style == "llm" else template


def script_checks(config) -> dict:
    """What the sources step takes from the script step of a run config (`RunConfig`): its verdict
    and whether a rewrite decides `too_long` (SourcesStep's `verdict`, `rewrite_length`)."""
    cfg = config.script
    return {"verdict": verdict(cfg, config.seed), "rewrite_length": cfg.style == "llm"}


def script_batch(items: list[SourceItem], cfg: ScriptConfig, seed: int) -> list[Dialogue | Reject]:
    """The template script stage: every item times its variants."""
    return [script_item(item, v, cfg, seed) for item in items for v in variant_numbers(item, cfg)]

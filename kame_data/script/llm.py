"""LLM rewrite mode (`script.style: llm`): an LLM turns each template dialogue into natural
conversation, through the same backends and request cache as the oracle stage.

The template dialogue is always built first: it gives the facts the rewrite must keep, the number
of turns, and the fallback. A rewrite is refused (and the template used, and counted) when it is
empty, has the wrong number of turns, is too long, is not speakable after normalisation, or drops
the answer. Items without a reference answer (most of MT-Bench) have no template: the model
answers them itself, and a refused answer is a Reject. When the service itself failed (after its
retries) the dialogue is a transient `llm_failed` reject, which a rerun tries again.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter

from kame_data.llm.base import ChatBackend, ChatRequest
from kame_data.records import ASSISTANT, LETTERS, USER, Dialogue, Reject, SourceItem
from kame_data.script.template import (
    ScriptConfig,
    result_phrase,
    script_turns,
    to_dialogue,
    variant_count,
)
from kame_data.text import is_speakable, spoken_words, to_spoken

log = logging.getLogger(__name__)

SYSTEM = (
    "You rewrite quiz items as short, natural spoken conversations between a user and an assistant, "
    "for speech synthesis. Write the way people talk: contractions, plain sentences, no lists, no "
    "markdown, no symbols, no formulas, and every number spelled out in words. The user asks in their "
    "own words{options}. The assistant answers correctly and conversationally and gives a brief reason. "
    "Each user turn has at most {user_words} words; each assistant turn at most {assistant_words} words. "
    "Reply with exactly {lines} lines, alternating 'USER:' and 'ASSISTANT:', starting with 'USER:'."
)
# One line of style per variant, so the variants of an item are asked for different wordings.
STYLES = (
    "The user sounds curious and relaxed.",
    "The user is in a hurry and gets to the point.",
    "The user thinks out loud a little before asking.",
    "The user is polite and a bit formal.",
    "The user is studying for an exam and wants to be sure.",
)


def _seed(*parts: object) -> int:
    return int(hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def build_request(item: SourceItem, variant: int, template: list[tuple[str, str]] | None, cfg: ScriptConfig,
                  seed: int, attempt: int = 0) -> ChatRequest:
    """The rewrite request for one dialogue."""
    llm = cfg.llm
    n_turns = len(template) if template else 2 * (1 + len(item.followups))
    read_options = bool(item.options) and cfg.mmlu_options != "open"
    system = SYSTEM.format(options=", reading out the answer options with their letters" if read_options else "",
                           user_words=llm.max_user_words, assistant_words=llm.max_assistant_words, lines=n_turns)
    parts = [f"Question: {item.question.strip()}"]
    if item.options:
        parts.append("Options:\n" + "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(item.options)))
        parts.append(f"Correct answer: {item.answer_letter}, {item.answer}")
    elif item.answer:
        parts.append(f"Correct answer: {item.answer}")
    else:
        parts.append("Correct answer: not given; answer it yourself, briefly and correctly.")
    if item.explanation:
        parts.append(f"Worked solution: {' '.join(item.explanation.split())}")
    for k, f in enumerate(item.followups, 1):
        ref = f.answer or "not given; answer it yourself, briefly and correctly"
        parts.append(f"Follow-up question {k}: {f.question.strip()}\nFollow-up answer {k}: {ref}")
    if template:
        parts.append("A plain version of the conversation, to rewrite:\n"
                     + "\n".join(f"{'USER' if role == USER else 'ASSISTANT'}: {text}" for role, text in template))
    parts.append(STYLES[(variant + _seed(seed, item.id)) % len(STYLES)])
    return ChatRequest(messages=(("system", system), ("user", "\n\n".join(parts))), max_tokens=llm.max_tokens,
                       temperature=llm.temperature, seed=_seed(seed, item.id, variant, attempt) % (2 ** 31))


_LINE = re.compile(r"^\s*[*_#>\-\s]*(USER|ASSISTANT|User|Assistant)\s*[*_]*\s*:\s*[*_]*\s*(.*)$")


def parse_reply(text: str) -> list[tuple[str, str]]:
    """'USER: ...' / 'ASSISTANT: ...' lines -> (role, text); unlabelled lines continue the last turn."""
    turns: list[tuple[str, str]] = []
    for line in text.replace("\r", "").split("\n"):
        m = _LINE.match(line)
        if m:
            role = USER if m.group(1).upper() == "USER" else ASSISTANT
            turns.append((role, m.group(2).strip()))
        elif turns and line.strip():
            turns[-1] = (turns[-1][0], f"{turns[-1][1]} {line.strip()}")
    return [(role, re.sub(r"[*_`#]+", "", t).strip()) for role, t in turns]


def _keeps_answer(item: SourceItem, assistant: str) -> bool:
    """Does the first assistant turn still carry the answer (its letter, or the answer's words)?"""
    said = f" {to_spoken(assistant).lower()} "
    if item.options:
        letters = [a for a in item.answer_letter.split(",") if a]
        if any(re.search(rf"\b{a.lower()}\b", said) for a in letters):
            return True
    target = [w.lower() for w in spoken_words(to_spoken(result_phrase(item)))]
    if not target:
        return True
    hits = sum(f" {w} " in said or f" {w}," in said or f" {w}." in said for w in target)
    return hits >= max(1, round(0.6 * len(target)))


def check_rewrite(item: SourceItem, turns: list[tuple[str, str]], expected: int, cfg: ScriptConfig) -> str:
    """'' if usable, else the reason it is not."""
    if not turns:
        return "empty"
    if len(turns) != expected or any(role != (USER if k % 2 == 0 else ASSISTANT) for k, (role, _) in enumerate(turns)):
        return "wrong_turns"
    for role, text in turns:
        spoken = to_spoken(text)
        if not spoken_words(spoken):
            return "empty"
        if not is_speakable(spoken) or re.search(r"\d", spoken):
            return "unspeakable"
        limit = cfg.llm.max_user_words if role == USER else cfg.llm.max_assistant_words
        if len(spoken_words(spoken)) > limit * 1.25:  # a little slack: normalisation adds words ("$5" -> "five dollars")
            return "too_long"
    if item.answer and not _keeps_answer(item, turns[1][1]):
        return "answer_lost"
    return ""


def rewrite_batch(items: list[SourceItem], cfg: ScriptConfig, seed: int, backend: ChatBackend,
                  stats: Counter) -> list[Dialogue | Reject]:
    """The LLM script stage for a batch: every item times its variants, template on failure."""
    jobs = []  # (item, variant, template turns or None)
    for item in items:
        for v in range(variant_count(item, cfg)):
            t = script_turns(item, v, cfg, seed)
            jobs.append((item, v, t if isinstance(t, list) else None))
    results: list[list[tuple[str, str]] | None] = [None] * len(jobs)
    reasons = [""] * len(jobs)
    errors = [""] * len(jobs)  # the service's last failure, if any attempt failed: not a verdict on the item
    pending = list(range(len(jobs)))
    for attempt in range(cfg.llm.retries + 1):
        if not pending:
            break
        reqs = [build_request(jobs[i][0], jobs[i][1], jobs[i][2], cfg, seed, attempt) for i in pending]
        answers = backend.complete(reqs)
        still = []
        for i, res in zip(pending, answers):
            item, _, template = jobs[i]
            expected = len(template) if template else 2 * (1 + len(item.followups))
            turns = parse_reply(res.text)
            reasons[i] = "llm_error" if getattr(res, "error", "") else check_rewrite(item, turns, expected, cfg)
            errors[i] = getattr(res, "error", "") or errors[i]
            if reasons[i]:
                still.append(i)
            else:
                results[i] = turns
        pending = still
    out: list[Dialogue | Reject] = []
    for i, (item, v, template) in enumerate(jobs):
        if results[i] is not None:
            stats["llm"] += 1
            out.append(to_dialogue(item, v, results[i]))
        elif errors[i]:
            # The service failed: the template would stand in for good, though a rerun may well
            # get a usable rewrite. A transient reject is retried instead.
            stats["failed"] += 1
            out.append(Reject("script", f"{item.id}-v{v}", "llm_failed",
                              f"the rewrite request failed after retries ({errors[i]})", transient=True))
        elif template is not None:
            stats["fallback"] += 1
            stats[f"fallback_{reasons[i]}"] += 1
            log.debug("%s-v%d: rewrite unusable (%s); using the template", item.id, v, reasons[i])
            out.append(to_dialogue(item, v, template))
        else:
            stats["rejected"] += 1
            out.append(Reject("script", f"{item.id}-v{v}", "llm_unusable",
                              f"no reference answer and the rewrite was unusable ({reasons[i]})"))
    return out

"""LLM rewrite mode (`script.style: llm`): an LLM turns each template dialogue into natural
conversation, through the same backends and request cache as the oracle stage.

The template dialogue is always built first: it gives the options as read (with their letters),
the answer the rewrite must keep, the number of turns, and the fallback. A rewrite is refused (and
retried with a new seed, then the template used; each case counted) when it is empty, has the
wrong number of turns, carries markup, runs over the word or `max_turn_seconds` limits, is not
speakable after normalisation, or loses the answer (kame_data/script/answer.py: the letter and
option text, or the number with its unit, said at the end of the assistant's turn). Items without
a reference answer (most of MT-Bench) have no template: the model answers them itself, and a
refused answer is a Reject. When the service itself failed (after its retries) the dialogue is a
transient `llm_failed` reject, which a rerun tries again. When the service refused the request
(HTTP 400/413/422: a content filter, a prompt over the context) it is not asked again: the template
stands in, as for any unusable rewrite (counted `fallback_llm_refused`), and an item without one is
a final `llm_refused` reject with the service's reason.

An item the template cannot fit in a turn (`too_long`) is offered to the rewrite too: the request
carries its plain version with no length limit and the fewest options (template.unfitted) and asks
for it condensed to the turn's budget, keeping every fact needed. The rewrite is kept only when it
fits, keeps the answer and still says every number of the question (`facts_lost`); otherwise the
item stays refused `too_long` (there is no template to fall back on). docs/design.md, "Dialogue counts".
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter

from kame_data.llm.base import ChatBackend, ChatRequest
from kame_data.records import ASSISTANT, USER, Dialogue, Reject, SourceItem
from kame_data.script.answer import Target, answer_lost
from kame_data.script.solution import sentences
from kame_data.script.template import (
    Script,
    ScriptConfig,
    checked_dialogue,
    script_turns,
    seconds,
    to_dialogue,
    unfitted,
    variant_numbers,
)
from kame_data.scrub import scrub
from kame_data.text import is_speakable, spoken_words, to_spoken
from kame_data.text.inventory import inventory_problem

log = logging.getLogger(__name__)

SYSTEM = (
    "You rewrite quiz items as short, natural spoken conversations between a user and an assistant, "
    "for speech synthesis. Write what people say out loud: contractions, plain sentences, no lists, no "
    "markdown, no symbols, no formulas, and every number spelled out in words. The user asks in their "
    "own words{options}. The assistant answers like a person explaining to a friend: it keeps the reasoning "
    "but says each calculation only as its result (\"so that's forty-eight hours\"), never reads an equation "
    "aloud, and ends by stating the answer once{answer_rule}. "
    "Each user turn has at most {user_words} words; each assistant turn at most {assistant_words} words. "
    "Reply with exactly {lines} lines, alternating 'USER:' and 'ASSISTANT:', starting with 'USER:', and "
    "nothing else."
)
# One line of style per variant, so the variants of an item are asked for different wordings.
STYLES = (
    "The user sounds curious and relaxed.",
    "The user is in a hurry and gets to the point.",
    "The user thinks out loud a little before asking.",
    "The user is polite and a bit formal.",
    "The user is studying for an exam and wants to be sure.",
)
# Markup a voice cannot say and the normaliser would not make sense of (HTML, code, links, tables):
# refused, not cleaned. Light markdown is stripped by `parse_reply`; formulas are the normaliser's.
_MARKUP = re.compile(r"```|</?[a-zA-Z][^>]*>|https?://|\[[^\]]*\]\(|\|\s*[-:]{3,}|^\s*\|.*\|\s*$")


def _seed(*parts: object) -> int:
    return int(hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def _answer_line(target: Target) -> str:
    if target.letter:
        return f"Correct answer: {target.letter}, {target.text} (the assistant names the letter and the option)"
    if target.number:
        return (f"Correct answer: {target.text}, said as \"{to_spoken(target.text)}\" "
                f"(the assistant's last sentence says it, with the unit)")
    return f"Correct answer: {target.text}"


CONDENSE = ("The plain version below is too long to say in one go. Condense the user's question to at most "
            "{user_words} words (about {seconds:.0f} seconds spoken): keep every number, name and fact needed to "
            "answer it{options}, and drop the rest. The assistant's answer stays the correct one.")


def build_request(item: SourceItem, variant: int, script: Script | None, cfg: ScriptConfig, seed: int,
                  attempt: int = 0, condense: bool = False) -> ChatRequest:
    """The rewrite request for one dialogue; `condense`: the template could not fit the item, and
    `script` is its plain version with no length limit (template.unfitted), to be cut to the budget."""
    llm = cfg.llm
    n_turns = len(script.turns) if script else 2 * (1 + len(item.followups))
    shown = script.shown if script else ()
    if script and script.target.letter:
        answer_rule = ", with the letter of the right option and its text"
    elif script and script.target.number:
        answer_rule = ", with the unit the question asks for"
    else:
        answer_rule = ""
    system = SYSTEM.format(options=", reading out the answer options below with their letters" if shown else "",
                           answer_rule=answer_rule, user_words=llm.max_user_words,
                           assistant_words=llm.max_assistant_words, lines=n_turns)
    parts = [f"Question: {item.question.strip()}"]
    if shown:
        parts.append("Options:\n" + "\n".join(f"{letter}. {text}" for letter, text in shown))
    if script:
        parts.append(_answer_line(script.target))
    else:
        parts.append("Correct answer: not given; answer it yourself, briefly and correctly.")
    if item.explanation:
        worked = " ".join(sentences(item.explanation)) if item.source == "gsm8k" else " ".join(item.explanation.split())
        parts.append(f"Worked solution: {worked}")
    for k, f in enumerate(item.followups, 1):
        ref = f.answer or "not given; answer it yourself, briefly and correctly"
        parts.append(f"Follow-up question {k}: {f.question.strip()}\nFollow-up answer {k}: {ref}")
    if condense:
        words = min(llm.max_user_words, int(cfg.max_turn_seconds * cfg.words_per_second))
        parts.append(CONDENSE.format(user_words=words, seconds=cfg.max_turn_seconds,
                                     options=", and the options with their letters" if shown else ""))
    if script:
        parts.append("A plain version of the conversation, to rewrite:\n"
                     + "\n".join(f"{'USER' if role == USER else 'ASSISTANT'}: {text}" for role, text in script.turns))
    parts.append(STYLES[(variant + _seed(seed, item.id)) % len(STYLES)])
    return ChatRequest(messages=(("system", system), ("user", "\n\n".join(parts))), max_tokens=llm.max_tokens,
                       temperature=llm.temperature, seed=_seed(seed, item.id, variant, attempt) % (2 ** 31),
                       item=f"{item.id}-v{variant}")


_LINE = re.compile(r"^\s*[*_#>\-\s]*(USER|ASSISTANT|User|Assistant)\s*[*_]*\s*:\s*[*_]*\s*(.*)$")


def parse_reply(text: str) -> list[tuple[str, str]]:
    """'USER: ...' / 'ASSISTANT: ...' lines -> (role, text). An unlabelled line continues the last
    turn; after a blank line it is the model talking about its reply ("Hope this helps!") and is left out.
    Light markdown (bold, italics, headings) is removed."""
    turns: list[tuple[str, str]] = []
    open_turn = False
    for line in text.replace("\r", "").split("\n"):
        m = _LINE.match(line)
        if m:
            role = USER if m.group(1).upper() == "USER" else ASSISTANT
            turns.append((role, m.group(2).strip()))
            open_turn = True
        elif not line.strip():
            open_turn = False
        elif turns and open_turn:
            turns[-1] = (turns[-1][0], f"{turns[-1][1]} {line.strip()}")
    return [(role, re.sub(r"\*\*|__|(?<!\w)[*_](?=\w)|(?<=\w)[*_](?!\w)|`", "", t).strip()) for role, t in turns]


def check_rewrite(item: SourceItem, turns: list[tuple[str, str]], expected: int, cfg: ScriptConfig,
                  target: Target | None = None) -> str:
    """'' if usable, else the reason it is not."""
    if not turns:
        return "empty"
    if len(turns) != expected or any(role != (USER if k % 2 == 0 else ASSISTANT) for k, (role, _) in enumerate(turns)):
        return "wrong_turns"
    for role, text in turns:
        if _MARKUP.search(text):
            return "markup"
        spoken = to_spoken(text)
        if not spoken_words(spoken):
            return "empty"
        if not is_speakable(spoken):
            return "unspeakable"
        problem = inventory_problem(text, spoken)
        if problem is not None:
            return problem.reason
        limit = cfg.llm.max_user_words if role == USER else cfg.llm.max_assistant_words
        # a little slack on words: normalisation adds some ("$5" -> "five dollars")
        if len(spoken_words(spoken)) > limit * 1.25 or seconds(text, cfg) > cfg.max_turn_seconds:
            return "too_long"
    if target is not None and answer_lost(target, to_spoken(turns[1][1])):
        return "answer_lost"
    return ""


_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")


def _said(text: str) -> str:
    """Spoken words with 'and' left out ('one hundred and five' and 'one hundred five' are one number)."""
    return " " + " ".join(w for w in spoken_words(to_spoken(text)) if w != "and") + " "


def facts_lost(item: SourceItem, turns: list[tuple[str, str]]) -> str:
    """'' if a condensed user turn still says every number of the item's question (the facts an
    answer is worked from), in digits or in words, as a count or as a year ('eighteen fifty'), else
    the first one it dropped."""
    said = _said(turns[0][1])
    for number in dict.fromkeys(_NUMBER.findall(item.question)):
        readings = {_said(number), _said(f"in {number}").removeprefix(" in")}
        if not any(r.strip() and r in said for r in readings):
            return number
    return ""


def rewrite_batch(items: list[SourceItem], cfg: ScriptConfig, seed: int, backend: ChatBackend,
                  stats: Counter) -> list[Dialogue | Reject]:
    """The LLM script stage for a batch: every item times its variants, template on failure.

    `stats` counts rewrites used (`llm`), each refused attempt by reason (`refused_<reason>`),
    retries, and fallbacks to the template by the last reason (`fallback_<reason>`)."""
    jobs: list[tuple[SourceItem, int, Script | Reject | None]] = []
    condensing: set[int] = set()  # jobs the template cannot fit: their rewrite must condense, no fallback
    for item in items:
        for v in variant_numbers(item, cfg):
            script = script_turns(item, v, cfg, seed)
            no_answer = isinstance(script, Reject) and script.reason == "no_reference_answer"
            if isinstance(script, Reject) and script.reason == "too_long":
                plain = unfitted(item, v, cfg, seed)
                if isinstance(plain, Script):
                    condensing.add(len(jobs))
                    script = plain
            jobs.append((item, v, None if no_answer else script))
    results: list[list[tuple[str, str]] | None] = [None] * len(jobs)
    reasons = [""] * len(jobs)
    errors = [""] * len(jobs)  # the service's last failure, if any attempt failed: not a verdict on the item
    refusals = [""] * len(jobs)  # the service's reason when it refused the request: a verdict, never retried
    pending = [i for i, job in enumerate(jobs) if not isinstance(job[2], Reject)]
    for attempt in range(cfg.llm.retries + 1):
        if not pending:
            break
        if attempt:
            stats["retried"] += len(pending)
        reqs = [build_request(jobs[i][0], jobs[i][1], jobs[i][2], cfg, seed, attempt, i in condensing)
                for i in pending]
        answers = backend.complete(reqs)
        still = []
        for i, res in zip(pending, answers):
            item, _, script = jobs[i]
            expected = len(script.turns) if script else 2 * (1 + len(item.followups))
            turns = parse_reply(res.text)
            if res.refused:
                reasons[i], refusals[i] = "llm_refused", res.refusal
                stats["refused_llm_refused"] += 1
                continue  # the same request, another seed: the same refusal
            reasons[i] = "llm_error" if res.error else \
                check_rewrite(item, turns, expected, cfg, script.target if script else None)
            if not reasons[i] and i in condensing and facts_lost(item, turns):
                reasons[i] = "facts_lost"
            errors[i] = (res.detail or res.error) or errors[i]
            if reasons[i]:
                stats[f"refused_{reasons[i]}"] += 1
                still.append(i)
            else:
                results[i] = turns
        pending = still
    out: list[Dialogue | Reject] = []
    for i, (item, v, script) in enumerate(jobs):
        if isinstance(script, Reject):
            stats["template_rejected"] += 1
            out.append(script)
        elif results[i] is not None:
            stats["llm"] += 1
            stats["condensed"] += i in condensing
            out.append(to_dialogue(item, v, results[i], script.target if script else None))
        elif i in condensing and not (errors[i] and not refusals[i]):
            # the template cannot fit it: no fallback, and a rewrite that did not fit or lost the answer
            # (or a refused request) leaves the item refused for its length, as the template left it
            stats["rejected"] += 1
            stats[f"condense_failed_{reasons[i]}"] += 1
            why = f"the service refused it ({scrub(refusals[i])})" if refusals[i] else f"its rewrite: {reasons[i]}"
            out.append(Reject("script", f"{item.id}-v{v}", "too_long",
                              f"the template cannot fit it in {cfg.max_turn_seconds:.0f} s, nor could an LLM "
                              f"condensing it ({why})"))
        elif refusals[i] and script is None:
            stats["rejected"] += 1
            out.append(Reject("script", f"{item.id}-v{v}", "llm_refused",
                              f"no reference answer and the LLM service refused the rewrite ({scrub(refusals[i])})"))
        elif errors[i] and not refusals[i]:
            # The service failed: the template would stand in for good, though a rerun may well
            # get a usable rewrite. A transient reject is retried instead.
            stats["failed"] += 1
            out.append(Reject("script", f"{item.id}-v{v}", "llm_failed",
                              f"the rewrite request failed ({scrub(errors[i])})", transient=True))
        elif script is not None:
            stats["fallback"] += 1
            stats[f"fallback_{reasons[i]}"] += 1
            log.debug("%s-v%d: rewrite unusable (%s); using the template", item.id, v, reasons[i])
            out.append(checked_dialogue(item, v, script))
        else:
            stats["rejected"] += 1
            out.append(Reject("script", f"{item.id}-v{v}", "llm_unusable",
                              f"no reference answer and the rewrite was unusable ({reasons[i]})"))
    return out

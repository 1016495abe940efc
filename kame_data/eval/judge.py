"""Single-answer grading, the way MT-Bench's judge works: a 1-10 rating written `[[N]]`, temperature 0,
the reference answer shown for the categories that have one, the second turn judged with both turns
shown. The prompts are ours; FastChat's own (its judge_prompts.jsonl) can be given instead.

A judgment that is not exactly one rating from 1 to 10 is kept in the file with score -1 and the
reason (FastChat's result tools drop score -1); a judge that refuses one question (HTTP 400) or
fails it after its retries costs that judgment, not the run. Every judge call goes through the LLM
cache, so a rerun asks nothing already answered.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kame_data.eval.questions import Question
from kame_data.llm.base import ChatBackend, ChatRequest

# FastChat judges these categories against their reference answers.
REFERENCE_CATEGORIES = ("math", "reasoning", "coding")
JUDGE_MAX_TOKENS = 2048
_RATING = re.compile(r"\[\[\s*(-?\d+(?:\.\d+)?)\s*\]\]")

# Reasons a judgment is dropped (its score is -1).
NO_RATING, SEVERAL, OUT_OF_RANGE = "no_rating", "several_ratings", "out_of_range"
REFUSED, FAILED, NO_ANSWER = "judge_refused", "judge_failed", "no_answer"


@dataclass(frozen=True)
class JudgePrompt:
    """One prompt of a judge: `template` is filled with question, answer, ref_answer_1 (one turn),
    or question_1, answer_1, question_2, answer_2, ref_answer_1, ref_answer_2 (the second turn)."""

    name: str
    system: str
    template: str


_RULES = ("Rate how well the AI assistant's answer serves the user: how helpful, relevant, accurate, deep, "
          "creative and detailed it is. Begin with a short explanation, as impartial as you can make it. "
          "Then give the rating from 1 to 10, written exactly like this: \"Rating: [[5]]\".")
_REF_RULES = ("Rate the AI assistant's answer for correctness and helpfulness. A reference answer is given: "
              "compare the assistant's answer with it, name every mistake, and explain briefly and "
              "impartially. Then give the rating from 1 to 10, written exactly like this: \"Rating: [[5]]\".")
_MULTI = " Judge only the assistant's answer to the second question; the first exchange is context."

PROMPTS: dict[str, JudgePrompt] = {
    "single-v1": JudgePrompt("single-v1", "You are a careful, impartial judge of AI assistants' answers.",
                             f"{_RULES}\n\n[Question]\n{{question}}\n\n[The assistant's answer]\n{{answer}}\n"),
    "single-math-v1": JudgePrompt("single-math-v1", "You are a careful, impartial judge of AI assistants' answers.",
                                  f"{_REF_RULES}\n\n[Question]\n{{question}}\n\n[Reference answer]\n{{ref_answer_1}}\n\n"
                                  "[The assistant's answer]\n{answer}\n"),
    "single-v1-multi-turn": JudgePrompt(
        "single-v1-multi-turn", f"You are a careful, impartial judge of AI assistants' answers. {_RULES}{_MULTI}",
        "[User]\n{question_1}\n\n[Assistant]\n{answer_1}\n\n[User]\n{question_2}\n\n[Assistant]\n{answer_2}\n"),
    "single-math-v1-multi-turn": JudgePrompt(
        "single-math-v1-multi-turn", f"You are a careful, impartial judge of AI assistants' answers. {_REF_RULES}{_MULTI}",
        "[Reference for the first question]\n{ref_answer_1}\n\n[Reference for the second question]\n{ref_answer_2}\n\n"
        "[User]\n{question_1}\n\n[Assistant]\n{answer_1}\n\n[User]\n{question_2}\n\n[Assistant]\n{answer_2}\n"),
}


def load_prompts(path: str | Path) -> dict[str, JudgePrompt]:
    """A judge_prompts.jsonl in FastChat's format (name, system_prompt, prompt_template); it must hold
    the four single-grading prompts."""
    out = {}
    for n, line in enumerate(Path(path).read_text("utf-8").splitlines(), 1):
        if line.strip():
            row = json.loads(line)
            if isinstance(row, dict) and {"name", "system_prompt", "prompt_template"} <= row.keys():
                out[row["name"]] = JudgePrompt(row["name"], row["system_prompt"], row["prompt_template"])
    missing = [name for name in PROMPTS if name not in out]
    if missing:
        raise ValueError(f"{path}: no prompt named {', '.join(missing)} (a FastChat judge_prompts.jsonl has them)")
    return {name: out[name] for name in PROMPTS}


def parse_rating(judgment: str) -> tuple[float, str]:
    """(score, '') for exactly one rating in 1-10 (repeated ratings of the same value count once),
    else (-1, reason)."""
    found = {float(m) for m in _RATING.findall(judgment or "")}
    if not found:
        return -1.0, NO_RATING
    if len(found) > 1:
        return -1.0, SEVERAL
    score = found.pop()
    if not 1.0 <= score <= 10.0:
        return -1.0, OUT_OF_RANGE
    return score, ""


def prompt_for(q: Question, turn: int, answers: list[str], prompts: dict[str, JudgePrompt]) -> tuple[JudgePrompt, str]:
    """The prompt that judges turn `turn` (1 or 2) of `answers` to `q`, and its text."""
    ref = q.category in REFERENCE_CATEGORIES and len(q.reference) >= turn
    name = ("single-math-v1" if ref else "single-v1") + ("-multi-turn" if turn == 2 else "")
    p = prompts[name]
    if turn == 1:
        fields = {"question": q.turns[0], "answer": answers[0]}
    else:
        fields = {"question_1": q.turns[0], "answer_1": answers[0], "question_2": q.turns[1], "answer_2": answers[1]}
    if ref:
        fields.update({f"ref_answer_{i + 1}": r for i, r in enumerate(q.reference[:2])})
    return p, p.template.format(**fields)


def judge(questions: list[Question], answers: dict[int, dict[str, Any]], backend: ChatBackend,
          prompts: dict[str, JudgePrompt] = PROMPTS, turns: tuple[int, ...] = (1, 2)) -> list[dict[str, Any]]:
    """FastChat single-judgment rows ({question_id, model, judge: [judge model, prompt], user_prompt,
    judgment, score, turn, tstamp}) for every turn of the questions `answers` holds, plus `reason`
    where score is -1 (an empty answer to a turn is `no_answer`). One batch: a remote judge works on
    many at once (its client bounds how many)."""
    rows, requests, slots = [], [], []
    model_id = next((a["model_id"] for a in answers.values()), "")
    for q in questions:
        row = answers.get(q.question_id)
        if row is None:
            continue
        for turn in turns:
            if turn > len(q.turns):
                continue
            base = {"question_id": q.question_id, "model": model_id, "turn": turn}
            said = row["choices"][0]["turns"]
            if len(said) < turn or not all(s.strip() for s in said[:turn]):
                rows.append({**base, "judge": [backend.model, ""], "user_prompt": "", "judgment": "", "score": -1.0,
                             "reason": NO_ANSWER, "tstamp": time.time()})
                continue
            p, text = prompt_for(q, turn, said, prompts)
            slots.append(len(rows))
            rows.append({**base, "judge": [backend.model, p.name], "user_prompt": text})
            requests.append(ChatRequest(messages=(("system", p.system), ("user", text)), max_tokens=JUDGE_MAX_TOKENS,
                                        temperature=0.0, seed=0, item=f"{model_id}/{q.question_id}/{turn}"))
    for at, res in zip(slots, backend.complete(requests)):
        if res.refused:
            score, reason, said = -1.0, REFUSED, res.refusal
        elif res.error:
            score, reason, said = -1.0, FAILED, res.detail or res.error
        else:
            (score, reason), said = parse_rating(res.text), res.text
        rows[at].update({"judgment": said, "score": score, "tstamp": time.time(), **({"reason": reason} if reason else {})})
    return rows

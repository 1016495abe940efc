"""Single-answer grading exactly as FastChat's MT-Bench judge does it (fastchat/llm_judge: common.py
`run_judge_single`, `play_a_match_single`, gen_judgment.py, show_result.py), so a score here means
what a score there means:

- every answer is judged, an empty or silent one included (a judge rates a non-answer low);
- the rating is the first `[[N]]` in the judgment, else the first `[N]`, read as the literal it is
  (7, or 7.5; 0 and 11 kept); only a judgment with neither scores -1, as does a judge call that
  failed (its judgment is FastChat's "$ERROR$");
- math, reasoning and coding are judged against a reference model's answers in FastChat's answer
  format (its reference_answer/gpt-4.jsonl ships with kame-data), the question file's `reference`
  field only as the fallback;
- rows are FastChat's ({question_id, model, judge: [judge model, prompt name], user_prompt, judgment,
  score, turn, tstamp}) and requests carry only the model, messages, temperature 0 and max tokens.

What a stricter reading would refuse (several ratings, a rating outside 1-10, single brackets, none)
is counted by the report without changing the score (`rating_flags`); `strict=True` keeps those
refusals as scores of -1 for those who want them. The prompts are ours; FastChat's own
(judge_prompts.jsonl) can be given instead. Every judge call goes through the LLM cache, so a rerun
asks nothing already answered.
"""

from __future__ import annotations

import ast
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kame_data.eval.questions import Question, shipped_file
from kame_data.llm.base import ChatBackend, ChatRequest

# FastChat judges these categories against their reference answers (common.py NEED_REF_CATS).
REFERENCE_CATEGORIES = ("math", "reasoning", "coding")
# FastChat's reference answers (fastchat/llm_judge/data/mt_bench/reference_answer/gpt-4.jsonl), shipped.
REFERENCES_SHIPPED = "mt_bench_reference_gpt-4.jsonl"
REFERENCES_SHA256 = "f957a5bc977badb66885ec970e6cd08527845780313f0995764260e5777b9b3f"
JUDGE_MAX_TOKENS = 2048
# FastChat's patterns (common.py one_score_pattern, one_score_pattern_backup): digits only, no sign, no
# spaces inside the brackets.
ONE_SCORE = re.compile(r"\[\[(\d+\.?\d*)\]\]")
ONE_SCORE_BACKUP = re.compile(r"\[(\d+\.?\d*)\]")
ERROR_OUTPUT = "$ERROR$"  # FastChat's judgment text when the judge API failed (API_ERROR_OUTPUT)

# What the stricter reading finds in a judgment (the report counts them; `strict` scores them -1).
NO_RATING, SEVERAL, OUT_OF_RANGE, SINGLE_BRACKET = "no_rating", "several_ratings", "out_of_range", "single_bracket"
JUDGE_ERROR = "judge_error"


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


def parse_rating(judgment: str) -> int | float:
    """FastChat's reading: the first `[[N]]`, else the first `[N]`, as its literal; -1 with neither."""
    match = ONE_SCORE.search(judgment or "") or ONE_SCORE_BACKUP.search(judgment or "")
    return ast.literal_eval(match.group(1)) if match else -1


def rating_flags(judgment: str) -> list[str]:
    """What a stricter reading than FastChat's finds in a judgment: no rating, a judge error, several
    different `[[N]]`, a rating outside 1-10, a rating in single brackets only."""
    if judgment == ERROR_OUTPUT:
        return [JUDGE_ERROR]
    doubles = {ast.literal_eval(m) for m in ONE_SCORE.findall(judgment or "")}
    flags = [SEVERAL] if len(doubles) > 1 else []
    if not doubles:
        if not ONE_SCORE_BACKUP.search(judgment or ""):
            return [NO_RATING]
        flags.append(SINGLE_BRACKET)
    score = parse_rating(judgment)
    if not 1 <= score <= 10:
        flags.append(OUT_OF_RANGE)
    return flags


def strict_rating(judgment: str) -> int | float:
    """The stricter reading: exactly one rating, in double brackets, within 1-10; else -1."""
    return -1 if rating_flags(judgment) else parse_rating(judgment)


References = dict[int, tuple[str, ...]]  # question id -> a reference model's answer per turn


def load_references(path: str | Path) -> References:
    """A reference model's answers in FastChat's answer format (its reference_answer/gpt-4.jsonl)."""
    from kame_data.eval.answers import read_answers

    return {qid: tuple(row["choices"][0]["turns"]) for qid, row in read_answers(path).items()}


def shipped_references() -> Path:
    """FastChat's reference answers (reference_answer/gpt-4.jsonl), shipped with kame-data and checked
    against their recorded checksum (kame_data/eval/data/README.md)."""
    return shipped_file(REFERENCES_SHIPPED, REFERENCES_SHA256, "--reference-answers")


def reference_for(q: Question, references: References | None) -> tuple[tuple[str, ...], str]:
    """The reference answers a judge sees for `q`, and where they come from: the reference file
    (`file`), the question file's `reference` field (`question_file`), or none (a category FastChat
    judges without one, `none`)."""
    if q.category not in REFERENCE_CATEGORIES:
        return (), "none"
    if references is not None and q.question_id in references:
        return references[q.question_id], "file"
    return (q.reference, "question_file") if q.reference else ((), "none")


def prompt_for(q: Question, turn: int, answers: list[str], prompts: dict[str, JudgePrompt],
               references: References | None = None) -> tuple[JudgePrompt, str]:
    """The prompt that judges turn `turn` (1 or 2) of `answers` to `q`, and its text."""
    reference, _ = reference_for(q, references)
    ref = len(reference) >= turn
    name = ("single-math-v1" if ref else "single-v1") + ("-multi-turn" if turn == 2 else "")
    p = prompts[name]
    said = list(answers) + [""] * (turn - len(answers))  # a turn never answered is judged as empty
    if turn == 1:
        fields = {"question": q.turns[0], "answer": said[0]}
    else:
        fields = {"question_1": q.turns[0], "answer_1": said[0], "question_2": q.turns[1], "answer_2": said[1]}
    if ref:
        fields.update({f"ref_answer_{i + 1}": r for i, r in enumerate(reference[:2])})
    return p, p.template.format(**fields)


def judge(questions: list[Question], answers: dict[int, dict[str, Any]], backend: ChatBackend,
          prompts: dict[str, JudgePrompt] = PROMPTS, turns: tuple[int, ...] = (1, 2),
          references: References | None = None, strict: bool = False) -> list[dict[str, Any]]:
    """FastChat single-judgment rows ({question_id, model, judge: [judge model, prompt], user_prompt,
    judgment, score, turn, tstamp}) for every turn of the questions `answers` holds, an empty answer
    judged like any other. A judge call that failed after its retries, or that the service refused,
    is FastChat's "$ERROR$" judgment with score -1. `strict`: score -1 where rating_flags finds
    anything. One batch: a remote judge works on many at once (its client bounds how many)."""
    rows, requests = [], []
    model_id = next((a["model_id"] for a in answers.values()), "")
    read = strict_rating if strict else parse_rating
    for q in questions:
        row = answers.get(q.question_id)
        if row is None:
            continue
        for turn in turns:
            if turn > len(q.turns):
                continue
            p, text = prompt_for(q, turn, row["choices"][0]["turns"], prompts, references)
            rows.append({"question_id": q.question_id, "model": model_id, "judge": [backend.model, p.name],
                         "user_prompt": text, "turn": turn})
            requests.append(ChatRequest(messages=(("system", p.system), ("user", text)), max_tokens=JUDGE_MAX_TOKENS,
                                        temperature=0.0, seed=None, item=f"{model_id}/{q.question_id}/{turn}"))
    out = []
    for row, res in zip(rows, backend.complete(requests)):
        said = ERROR_OUTPUT if res.refused or res.error else res.text
        out.append({**{k: row[k] for k in ("question_id", "model", "judge", "user_prompt")}, "judgment": said,
                    "score": -1 if said == ERROR_OUTPUT else read(said), "turn": row["turn"], "tstamp": time.time()})
    return out

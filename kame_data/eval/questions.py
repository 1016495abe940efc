"""MT-Bench questions as the paper uses them: FastChat's question.jsonl rows (question_id, category,
two turns, a reference answer for math, reasoning and coding), the paper's three categories by default.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

# The KAME paper keeps these three (30 questions, 60 judgments); `categories=None` keeps all eight.
PAPER_CATEGORIES = ("reasoning", "stem", "humanities")
CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")


# The shipped question file (kame_data/eval/data/README.md: origin, licence) and its checksum.
SHIPPED = "mt_bench_questions.jsonl"
SHIPPED_SHA256 = "119565adbab82227089cefdb44c8d7e2cf04dc0a0ec233634c82e7d4e2a944f7"


class QuestionError(ValueError):
    """A question file that cannot be used; the message names the line and the field."""


@dataclass(frozen=True)
class Question:
    question_id: int
    category: str
    turns: tuple[str, ...]
    reference: tuple[str, ...] = ()  # one reference answer per turn, where the category has them


def parse_question(row: object, where: str) -> Question:
    if not isinstance(row, dict):
        raise QuestionError(f"{where}: expected a JSON object, got {type(row).__name__}")
    qid, category, turns = row.get("question_id"), row.get("category"), row.get("turns")
    if isinstance(qid, bool) or not isinstance(qid, int):
        raise QuestionError(f"{where}: question_id must be an integer, got {qid!r}")
    if not isinstance(category, str) or not category:
        raise QuestionError(f"{where}: category must be a non-empty string, got {category!r}")
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
        raise QuestionError(f"{where}: turns must be a non-empty list of non-empty strings")
    reference = row.get("reference") or []
    if not isinstance(reference, list) or not all(isinstance(t, str) for t in reference):
        raise QuestionError(f"{where}: reference must be a list of strings")
    return Question(qid, category, tuple(turns), tuple(reference))


def load_questions(path: str | Path, categories: tuple[str, ...] | None = PAPER_CATEGORIES) -> list[Question]:
    """The questions of `categories` (None: all), in file order; ids must be unique."""
    out, seen = [], set()
    with Path(path).open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise QuestionError(f"{path}:{n}: not JSON ({e.msg})") from None
            q = parse_question(row, f"{path}:{n}")
            if q.question_id in seen:
                raise QuestionError(f"{path}:{n}: question_id {q.question_id} appears twice")
            seen.add(q.question_id)
            if categories is None or q.category in categories:
                out.append(q)
    if not out:
        raise QuestionError(f"{path}: no question in the categories {', '.join(categories or ())}")
    return out


def shipped_file(name: str, sha256: str, instead: str) -> Path:
    """A data file that ships with kame-data (kame_data/eval/data/README.md), checked against its
    recorded checksum; `instead`: the option that gives another file, named in the error."""
    path = Path(str(resources.files("kame_data.eval.data").joinpath(name)))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise QuestionError(f"{path}: checksum {digest[:12]}… is not the shipped file's ({sha256[:12]}…); "
                            f"reinstall kame-data or pass {instead}")
    return path


def shipped_questions() -> Path:
    """The MT-Bench question file that ships with kame-data, checked against its recorded checksum."""
    return shipped_file(SHIPPED, SHIPPED_SHA256, "--questions")

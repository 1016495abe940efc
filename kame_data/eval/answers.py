"""Answer files in FastChat's `model_answer` JSONL format, so FastChat's own judging and result tools
read them: one line per question, {question_id, answer_id, model_id, choices: [{index: 0, turns}],
tstamp}. Our extra per-turn figures (latency, took_turn) ride in `kame` and are ignored there."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Iterable

from kame_data import atomic

REQUIRED = ("question_id", "answer_id", "model_id", "choices", "tstamp")


class AnswerFileError(ValueError):
    """An answer file FastChat would not read; the message names the line and the field."""


def answer_record(question_id: int, model_id: str, turns: list[str], extra: dict[str, Any] | None = None,
                  tstamp: float | None = None) -> dict[str, Any]:
    """One question's answers; the answer id is a hash of what was answered (stable across reruns)."""
    digest = hashlib.sha256(json.dumps([question_id, model_id, turns], ensure_ascii=False).encode("utf-8"))
    row = {"question_id": question_id, "answer_id": digest.hexdigest()[:22], "model_id": model_id,
           "choices": [{"index": 0, "turns": list(turns)}], "tstamp": time.time() if tstamp is None else tstamp}
    if extra:
        row["kame"] = extra
    return row


def check_answer(row: object, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise AnswerFileError(f"{where}: expected a JSON object")
    missing = [k for k in REQUIRED if k not in row]
    if missing:
        raise AnswerFileError(f"{where}: missing {', '.join(missing)}")
    choices = row["choices"]
    if (not isinstance(choices, list) or not choices or not isinstance(choices[0], dict)
            or not isinstance(choices[0].get("turns"), list)
            or not all(isinstance(t, str) for t in choices[0]["turns"])):
        raise AnswerFileError(f"{where}: choices must be [{{index, turns: [str, ...]}}, ...]")
    if isinstance(row["question_id"], bool) or not isinstance(row["question_id"], int):
        raise AnswerFileError(f"{where}: question_id must be an integer")
    return row


def write_answers(path: str | Path, rows: Iterable[dict[str, Any]]) -> Path:
    """All rows at once, sorted by question id (as FastChat's reorg_answer_file leaves them)."""
    rows = sorted(rows, key=lambda r: r["question_id"])
    for r in rows:
        check_answer(r, str(path))
    atomic.write_jsonl(path, rows)
    return Path(path)


def read_answers(path: str | Path) -> dict[int, dict[str, Any]]:
    """question_id -> row; a later line for the same question replaces an earlier one (as FastChat)."""
    out: dict[int, dict[str, Any]] = {}
    with Path(path).open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise AnswerFileError(f"{path}:{n}: not JSON ({e.msg})") from None
                row = check_answer(row, f"{path}:{n}")
                out[row["question_id"]] = row
    return out

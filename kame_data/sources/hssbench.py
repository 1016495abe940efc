"""HSSBench (dozo/HSSBench): humanities items, options a dict of 2-5 letters, mostly image-bound.

Answers come as "A", but also "b" or "A,D" (several correct options); anything that does not name
existing options is a `malformed_answer` reject, never a crash. Whether the question needs its
picture is decided by the filters (kame_data/sources/filters.py), not here.
"""

from __future__ import annotations

import re

from kame_data.records import LETTERS, Reject, SourceItem
from kame_data.sources.common import safe_id

SOURCE = "hssbench"
_SEPARATORS = re.compile(r"[\s,，、;；/&]+|\band\b", re.IGNORECASE)


def answer_letters(raw: object, letters: list[str]) -> list[str] | None:
    """'b' -> ['B']; 'A,D' / 'A、D' / 'AD' -> ['A', 'D']; None if it names no existing option."""
    text = str(raw or "").strip().upper()
    parts = [p for p in _SEPARATORS.split(text) if p]
    if len(parts) == 1 and len(parts[0]) > 1 and all(ch in letters for ch in parts[0]):
        parts = list(parts[0])
    parts = [p.strip("().") for p in parts]
    if not parts or any(p not in letters for p in parts):
        return None
    return sorted(set(parts), key=letters.index)


def parse_row(row: dict, index: int) -> SourceItem | Reject:
    item_id = safe_id(SOURCE, row.get("id") or f"row{index}")
    question = str(row.get("question") or "").strip()
    raw_options = row.get("options") or {}
    if isinstance(raw_options, list):
        raw_options = dict(zip(LETTERS, raw_options))
    if not isinstance(raw_options, dict):
        return Reject("sources", item_id, "malformed_options", f"options of type {type(raw_options).__name__}")
    options = {str(k).strip().upper(): str(v).strip() for k, v in raw_options.items()
               if v is not None and str(v).strip()}
    letters = sorted(options)
    if not question:
        return Reject("sources", item_id, "malformed_question", "empty question")
    if len(letters) < 2 or letters != list(LETTERS[: len(letters)]):
        return Reject("sources", item_id, "malformed_options", f"option letters {letters}")
    answers = answer_letters(row.get("correct_answer"), letters)
    if answers is None:
        return Reject("sources", item_id, "malformed_answer", f"correct_answer {row.get('correct_answer')!r}")
    return SourceItem(
        id=item_id,
        source=SOURCE,
        category=str(row.get("category") or "other"),
        question=question,
        options=[options[k] for k in letters],
        answer=" and ".join(options[a] for a in answers),
        answer_letter=",".join(answers),
        explanation="",
        license="unknown",
        meta={"pic_path": str(row.get("pic_path") or "")},
    )

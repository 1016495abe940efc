"""MMLU-Pro (TIGER-Lab/MMLU-Pro): question, up to 10 options, letter answer, optional CoT."""

from __future__ import annotations

import re

from kame_data.records import Reject, SourceItem
from kame_data.sources.common import LETTERS, safe_id

SOURCE = "mmlu_pro"
_COT_HEAD = re.compile(r"^\s*A:\s*Let'?s think step by step\.?\s*", re.IGNORECASE)
_COT_TAIL = re.compile(r"\s*The answer is \(?[A-J]\)?\.?\s*$")


def parse_row(row: dict, index: int) -> SourceItem | Reject:
    qid = row.get("question_id", index)
    item_id = safe_id(SOURCE, qid)
    question = str(row.get("question") or "").strip()
    options = [str(o).strip() for o in (row.get("options") or []) if o is not None and str(o).strip() not in ("", "N/A")]
    if not question:
        return Reject("sources", item_id, "malformed_question", "empty question")
    if len(options) < 2:
        return Reject("sources", item_id, "malformed_options", f"{len(options)} usable options")
    answer_index = row.get("answer_index")
    letter = str(row.get("answer") or "").strip().upper()
    if not isinstance(answer_index, int) and letter in LETTERS:
        answer_index = LETTERS.index(letter)
    if not isinstance(answer_index, int) or not 0 <= answer_index < len(options):
        return Reject("sources", item_id, "malformed_answer", f"answer {row.get('answer')!r} / index {answer_index!r} not among {len(options)} options")
    cot = _COT_TAIL.sub("", _COT_HEAD.sub("", str(row.get("cot_content") or ""))).strip()
    return SourceItem(
        id=item_id,
        source=SOURCE,
        category=str(row.get("category") or "other"),
        question=question,
        options=options,
        answer=options[answer_index],
        answer_letter=LETTERS[answer_index],
        explanation=cot,
        license="mit",
        meta={"src": str(row.get("src") or "")},
    )

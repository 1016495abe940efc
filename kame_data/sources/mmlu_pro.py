"""MMLU-Pro (TIGER-Lab/MMLU-Pro): question, up to 10 options, letter answer, optional CoT.

The validation split carries `cot_content` ("A: Let's think step by step. ... The answer is (X).");
its middle becomes the explanation. Padding options ("N/A") are dropped and the answer index is
mapped onto the options that remain.
"""

from __future__ import annotations

import re

from kame_data.records import LETTERS, Reject, SourceItem
from kame_data.sources.common import safe_id

SOURCE = "mmlu_pro"
_COT_HEAD = re.compile(r"^\s*A:\s*Let'?s think step by step\.?\s*", re.IGNORECASE)
_COT_TAIL = re.compile(r"\s*The answer is \(?[A-J]\)?\.?\s*$")
_COT_BOILERPLATE = re.compile(r"^\s*We refer to [^.]{0,80} for help\.\s*", re.IGNORECASE)
_PADDING = {"", "N/A", "n/a"}


def parse_row(row: dict, index: int) -> SourceItem | Reject:
    qid = row.get("question_id")
    qid = index if qid is None else qid  # null: a missing value (Parquet), not the id "None"
    item_id = safe_id(SOURCE, qid)
    question = str(row.get("question") or "").strip()
    raw = [str(o).strip() if o is not None else "" for o in (row.get("options") or [])]
    kept = [i for i, o in enumerate(raw) if o not in _PADDING]
    options = [raw[i] for i in kept]
    if not question:
        return Reject("sources", item_id, "malformed_question", "empty question")
    if len(options) < 2:
        return Reject("sources", item_id, "malformed_options", f"{len(options)} usable options")
    answer_index = row.get("answer_index")
    letter = str(row.get("answer") or "").strip().upper()
    if not isinstance(answer_index, int) and len(letter) == 1 and letter in LETTERS:
        answer_index = LETTERS.index(letter)
    if not isinstance(answer_index, int) or answer_index not in kept:
        return Reject("sources", item_id, "malformed_answer",
                      f"answer {row.get('answer')!r} / index {answer_index!r} not among {len(options)} options")
    position = kept.index(answer_index)
    cot = _COT_TAIL.sub("", _COT_HEAD.sub("", str(row.get("cot_content") or ""))).strip()
    cot = _COT_BOILERPLATE.sub("", cot).strip()
    return SourceItem(
        id=item_id,
        source=SOURCE,
        category=str(row.get("category") or "other"),
        question=question,
        options=options,
        answer=options[position],
        answer_letter=LETTERS[position],
        explanation=cot,
        license="mit",
        meta={"src": str(row.get("src") or "")},
    )

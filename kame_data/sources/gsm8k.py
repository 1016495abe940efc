"""GSM8K (openai/gsm8k, configs `main` and `socratic`): word problems whose answers carry
`<<a*b=c>>` calculator notes and end in `#### N`; the steps become the explanation."""

from __future__ import annotations

import re

from kame_data.records import Reject, SourceItem
from kame_data.sources.common import text_id

SOURCE = "gsm8k"
CALC_NOTE = re.compile(r"<<[^<>]*>>")
_FINAL = re.compile(r"####\s*(.+?)\s*$", re.DOTALL)
_SOCRATIC_Q = re.compile(r"^[^\n]*\?\s*\*\*\s*", re.MULTILINE)


def parse_row(row: dict, index: int) -> SourceItem | Reject:
    question = str(row.get("question") or "").strip()
    raw = str(row.get("answer") or "")
    item_id = text_id(SOURCE, question) if question else f"{SOURCE}-row{index}"
    if not question:
        return Reject("sources", item_id, "malformed_question", "empty question")
    m = _FINAL.search(raw)
    if not m or not m.group(1).strip():
        return Reject("sources", item_id, "malformed_answer", "no '#### <answer>' line")
    final = m.group(1).strip().replace(",", "")
    steps = CALC_NOTE.sub("", raw[: m.start()])
    steps = _SOCRATIC_Q.sub("", steps)  # the socratic config prefixes each step with a sub-question
    # one step per line, often without a full stop: end each so sentences can be told apart
    lines = [line.strip() for line in steps.splitlines() if line.strip()]
    explanation = " ".join(line if line[-1] in ".!?" else line.rstrip(",;:") + "." for line in lines)
    return SourceItem(
        id=item_id,
        source=SOURCE,
        category="math",
        question=question,
        options=[],
        answer=final,
        answer_letter="",
        explanation=explanation,
        license="mit",
    )

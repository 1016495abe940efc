"""HSSBench (dozo/HSSBench): humanities items, options a dict of 2-5 letters, mostly image-bound."""

from __future__ import annotations

from kame_data.records import Reject, SourceItem
from kame_data.sources.common import LETTERS, refers_to_visual, safe_id

SOURCE = "hssbench"


def parse_row(row: dict, index: int) -> SourceItem | Reject:
    item_id = safe_id(SOURCE, row.get("id") or f"row{index}")
    question = " ".join(str(row.get("question") or "").split())
    raw_options = row.get("options") or {}
    if isinstance(raw_options, list):
        raw_options = dict(zip(LETTERS, raw_options))
    options = {str(k).strip().upper(): str(v).strip() for k, v in raw_options.items() if v is not None and str(v).strip()}
    letters = sorted(options)
    if not question:
        return Reject("sources", item_id, "malformed_question", "empty question")
    if len(letters) < 2 or letters != list(LETTERS[: len(letters)]):
        return Reject("sources", item_id, "malformed_options", f"option letters {letters}")
    visual = refers_to_visual(question)
    if visual:
        return Reject("sources", item_id, "needs_image", f"question refers to {visual!r}")
    answer_letters = [a.strip().upper() for a in str(row.get("correct_answer") or "").split(",") if a.strip()]
    if not answer_letters or any(a not in options for a in answer_letters):
        return Reject("sources", item_id, "malformed_answer", f"correct_answer {row.get('correct_answer')!r}")
    return SourceItem(
        id=item_id,
        source=SOURCE,
        category=str(row.get("category") or "other"),
        question=question,
        options=[options[k] for k in letters],
        answer=" and ".join(options[a] for a in answer_letters),
        answer_letter=",".join(answer_letters),
        explanation="",
        license="unknown",
        meta={"pic_path": str(row.get("pic_path") or "")},
    )

"""MT-Bench: two-turn open questions, from FastChat's `question.jsonl` (`question_id`, `turns`,
`reference`) or the hub mirror `HuggingFaceH4/mt_bench_prompts` (`prompt_id`, `prompt`, `reference`).

The second turn becomes a follow-up. Only some categories (math, reasoning, coding, a few STEM)
have reference answers; items without one carry an empty answer, which the template script
refuses and the LLM script answers itself.
"""

from __future__ import annotations

from kame_data.records import FollowUp, Reject, SourceItem
from kame_data.sources.common import safe_id

SOURCE = "mt_bench"


def _strings(value: object) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) if v is not None else "" for v in value]  # lists, tuples, numpy arrays from parquet


def parse_row(row: dict, index: int) -> SourceItem | Reject:
    native = next((row[k] for k in ("question_id", "prompt_id") if row.get(k) is not None), f"row{index}")
    item_id = safe_id(SOURCE, native)
    turns = [t.strip() for t in _strings(row.get("turns", row.get("prompt")))]
    references = [r.strip() for r in _strings(row.get("reference"))]
    if not turns or not turns[0]:
        return Reject("sources", item_id, "malformed_question", "no first turn")
    if any(not t for t in turns[1:]):
        return Reject("sources", item_id, "malformed_question", "an empty follow-up turn")
    answers = references + [""] * (len(turns) - len(references))
    return SourceItem(
        id=item_id,
        source=SOURCE,
        category=str(row.get("category") or "other"),
        question=turns[0],
        options=[],
        answer=answers[0],
        answer_letter="",
        explanation="",
        license="apache-2.0",
        followups=[FollowUp(question=t, answer=a) for t, a in zip(turns[1:], answers[1:])],
    )

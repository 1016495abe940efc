"""Custom sources: any JSONL / JSON / Parquet rows (or hub dataset) with a field mapping in the recipe.

    - kind: jsonl
      name: trivia                 # the `source` of its items (default "jsonl")
      path: data/trivia.jsonl
      fields: {question: q, answer: a, category: topic, options: choices, explanation: why, id: uid}

`question` and `answer` are required. `options` may be a list or a letter-keyed mapping; with
options, the answer may be a letter ("C"), a 0-based index, or the text of an option. A dotted
name (`meta.question`) reaches into nested objects.
"""

from __future__ import annotations

from typing import Any, Iterable

from kame_data.records import LETTERS, Reject, SourceItem
from kame_data.sources.common import safe_id, text_id

FIELDS = ("question", "answer", "category", "options", "explanation", "id")


def _get(row: dict, name: str | None) -> Any:
    if not name:
        return None
    value: Any = row
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def parse_row(row: dict, index: int, fields: dict[str, str], source: str = "jsonl") -> SourceItem | Reject:
    question = str(_get(row, fields.get("question")) or "").strip()
    native = _get(row, fields.get("id"))
    item_id = safe_id(source, native) if native not in (None, "") else (
        text_id(source, question) if question else f"{source}-row{index}")
    if not question:
        return Reject("sources", item_id, "malformed_question", f"no text in field {fields.get('question')!r}")
    raw_options = _get(row, fields.get("options"))
    if isinstance(raw_options, dict):
        raw_options = [raw_options[k] for k in sorted(raw_options, key=lambda k: str(k).upper())]
    options = [str(o).strip() for o in (raw_options or []) if o is not None and str(o).strip()]
    raw_answer = _get(row, fields.get("answer"))
    answer, letter = str(raw_answer if raw_answer is not None else "").strip(), ""
    if options:
        if isinstance(raw_answer, int) and not isinstance(raw_answer, bool) and 0 <= raw_answer < len(options):
            letter = LETTERS[raw_answer]
        elif len(answer) == 1 and answer.upper() in LETTERS[: len(options)]:
            letter = answer.upper()
        elif answer in options:
            letter = LETTERS[options.index(answer)]
        else:
            return Reject("sources", item_id, "malformed_answer",
                          f"answer {answer[:40]!r} is neither a letter, an index nor an option")
        answer = options[LETTERS.index(letter)]
    if not answer:
        return Reject("sources", item_id, "malformed_answer", f"no text in field {fields.get('answer')!r}")
    return SourceItem(
        id=item_id,
        source=source,
        category=str(_get(row, fields.get("category")) or "other"),
        question=question,
        options=options,
        answer=answer,
        answer_letter=letter,
        explanation=str(_get(row, fields.get("explanation")) or "").strip(),
    )


def unmatched_fields(rows: Iterable[dict], fields: dict[str, str]) -> list[str]:
    """What a `fields:` mapping gets wrong on these rows: each part whose field no row has, with
    the fields the rows do have (a mapping that matches nothing rejects every item as malformed)."""
    rows = [r for r in rows if isinstance(r, dict)]
    if not rows:
        return []
    seen = sorted({k for r in rows for k in r})
    have = ", ".join(seen[:12]) + (", ..." if len(seen) > 12 else "")
    return [f"fields: {part}: {name!r} matches no field of the first {len(rows)} rows (they have: {have})"
            for part in FIELDS if (name := fields.get(part)) and all(_get(r, name) is None for r in rows)]

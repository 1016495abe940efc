"""Flags a reviewer saved from the review page: which dialogues to leave out, and why.

The page saves `{"format": "kame-data-review-flags/1", "dataset": {...}, "flagged": [{"id", "note"}]}`.
A bare JSON list of ids, or `{"flagged": [ids]}`, is accepted too, so flags can be written by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FORMAT = "kame-data-review-flags/1"


class FlagsError(ValueError):
    """The flags file cannot be read; the message names the file and what is wrong."""


def _entries(doc: Any, path: Path) -> list[Any]:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        fmt = doc.get("format", FORMAT)
        if fmt != FORMAT:
            raise FlagsError(f"{path}: format {fmt!r} is not {FORMAT!r}")
        if "flagged" not in doc:
            raise FlagsError(f"{path}: no 'flagged' list (expected {{\"flagged\": [{{\"id\": ...}}, ...]}})")
        if not isinstance(doc["flagged"], list):
            raise FlagsError(f"{path}: 'flagged' must be a list")
        return doc["flagged"]
    raise FlagsError(f"{path}: expected a JSON object with 'flagged', or a list of ids")


def load_flag_notes(path: str | Path) -> dict[str, str]:
    """Flagged row id -> the reviewer's note ("" when none), in file order."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text("utf-8"))
    except FileNotFoundError as e:
        raise FlagsError(f"{path}: no such file") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise FlagsError(f"{path}: not a JSON file: {e}") from e
    except RecursionError:
        raise FlagsError(f"{path}: nested too deeply to be a flags file") from None
    out: dict[str, str] = {}
    for i, entry in enumerate(_entries(doc, path)):
        rid, note = (entry.get("id"), entry.get("note", "")) if isinstance(entry, dict) else (entry, "")
        if not isinstance(rid, str) or not rid.strip():
            raise FlagsError(f"{path}: flagged[{i}] has no row id (a non-empty string)")
        if not isinstance(note, str):
            raise FlagsError(f"{path}: flagged[{i}].note must be a string")
        out[rid] = note
    return out


def load_flags(path: str | Path) -> set[str]:
    """The row ids flagged in a flags file (from the review page, or a hand-written list)."""
    return set(load_flag_notes(path))

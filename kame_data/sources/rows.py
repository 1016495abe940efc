"""Reading raw rows from local files or the Hugging Face hub.

A line of a JSONL file that is not a row (not UTF-8, not JSON, cut short, not an object, nested
deeper than any benchmark row, or text with half a surrogate pair) comes out as a `BadRow` naming
its file and line, not as an error: the sources step turns it into a reject and goes on, up to the
source's `max_bad_rows`. A byte-order mark is simply skipped.
"""

from __future__ import annotations

import codecs
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator


class SourceError(ValueError):
    """A source cannot be read; the message names the file or hub id."""


@dataclass(frozen=True)
class BadRow:
    """A line (or list element) of a source file that is not a row."""

    file: str
    line: int  # 1-based line of a JSONL file, or element of a JSON list
    reason: str  # invalid_utf8 | invalid_json | truncated_json | not_an_object | too_deep | invalid_unicode
    detail: str

    @property
    def where(self) -> str:
        return where(self.file, self.line)


def where(file: str, line: int) -> str:
    """`name:line`, the id of a reject of a row that has no item id (yet)."""
    return f"{Path(file).name}:{line}"


# A benchmark row is two or three levels deep (a row, its options, a list of turns); anything far
# deeper is not a row, and its repr or validation could exhaust Python's recursion limit.
MAX_DEPTH = 32
_SURROGATE = re.compile("[\ud800-\udfff]")  # JSON's "\\ud800" escapes decode to these; not text


def read_rows(path: str | os.PathLike | None = None, hub: str | None = None, config: str | None = None,
              split: str | None = None) -> Iterator[dict | BadRow]:
    """Rows as dicts (and BadRows for malformed lines): from a local JSONL / JSON / Parquet
    file, or a hub id through `datasets`."""
    for _, row in numbered_rows(path, hub, config, split):
        yield row


def numbered_rows(path: str | os.PathLike | None = None, hub: str | None = None, config: str | None = None,
                  split: str | None = None) -> Iterator[tuple[int, dict | BadRow]]:
    """(line, row) pairs: the 1-based line of a JSONL file, element of a JSON list, or row of a
    Parquet file or hub split, so a reject of a row can name where it is."""
    if path is not None:
        label, rows = str(path), _read_local(Path(path))
    elif hub is not None:
        label, rows = hub, enumerate(_read_hub(hub, config, split), 1)
    else:
        raise SourceError("a source needs `path` or `hub`")
    for line, row in rows:
        if isinstance(row, dict):
            row = _not_text(row, label, line) or row
        yield line, row


def _not_text(row: dict, file: str, line: int) -> BadRow | None:
    """A BadRow when `row` is nested deeper than MAX_DEPTH or holds a lone surrogate (which no
    UTF-8 writer accepts); walked without recursion, so any depth is safe."""
    stack: list[tuple[object, int]] = [(row, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return BadRow(file, line, "invalid_unicode", "a \\u escape of half a surrogate pair is not text")
        elif isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                return BadRow(file, line, "too_deep", f"nested more than {MAX_DEPTH} levels deep")
            children = [*value.keys(), *value.values()] if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
    return None


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def parse_line(raw: bytes, file: str, lineno: int) -> dict | BadRow | None:
    """One JSONL line: its object, a BadRow saying what is wrong with it, or None when blank."""
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return BadRow(file, lineno, "invalid_utf8",
                      f"byte 0x{raw[e.start]:02x} at column {e.start + 1} is not UTF-8 text")
    if not line.strip():
        return None
    try:
        row = json.loads(line, parse_constant=_refuse_constant)
    except json.JSONDecodeError as e:
        if e.pos >= len(line.rstrip()) or e.msg.startswith("Unterminated string"):
            return BadRow(file, lineno, "truncated_json", "the line ends before its JSON value is complete")
        return BadRow(file, lineno, "invalid_json", f"not valid JSON: {e.msg} at column {e.colno}")
    except RecursionError:
        return BadRow(file, lineno, "too_deep", f"nested more than {MAX_DEPTH} levels deep")
    except ValueError as e:  # NaN / Infinity, or an integer of more digits than Python converts
        text = "an integer of more than 4300 digits" if "digits" in str(e) else str(e)
        return BadRow(file, lineno, "invalid_json", f"not valid JSON: {text}")
    if not isinstance(row, dict):
        return BadRow(file, lineno, "not_an_object", f"a JSON {type(row).__name__} where an object was expected")
    return row


def _read_local(path: Path) -> Iterator[tuple[int, dict | BadRow]]:
    if not path.is_file():
        raise SourceError(f"source file not found: {path}")
    suffix = "".join(path.suffixes[-1:]).lower()
    if suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            number = 0
            for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
                for row in batch.to_pylist():
                    number += 1
                    yield number, row
        except (pa.ArrowException, OSError) as e:
            raise SourceError(f"{path}: not a readable Parquet file: {e}") from e
    elif suffix == ".jsonl":
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                row = parse_line(raw, str(path), lineno)
                if row is not None:
                    yield lineno, row
    elif suffix == ".json":
        try:
            data = json.loads(path.read_bytes().decode("utf-8-sig"), parse_constant=_refuse_constant)
        except UnicodeDecodeError as e:
            raise SourceError(f"{path}: byte {e.start} is not UTF-8 text") from e
        except json.JSONDecodeError as e:
            raise SourceError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from e
        except RecursionError as e:  # one JSON document: nothing of it can be read
            raise SourceError(f"{path}: not readable: JSON nested deeper than Python's reader goes") from e
        except ValueError as e:
            raise SourceError(f"{path}: not valid JSON: {e}"[:200]) from e
        if isinstance(data, dict):
            data = next((v for v in data.values() if isinstance(v, list)), None)
        if not isinstance(data, list):
            raise SourceError(f"{path}: expected a JSON list of objects")
        for index, row in enumerate(data, 1):
            yield index, row if isinstance(row, dict) else BadRow(
                str(path), index, "not_an_object", f"element {index} is a JSON {type(row).__name__}, not an object")
    else:
        raise SourceError(f"{path}: unsupported file type {suffix!r} (use .jsonl, .json or .parquet)")


def _read_hub(hub: str, config: str | None, split: str | None) -> Iterator[dict]:
    import datasets

    try:
        ds = datasets.load_dataset(hub, config, split=split or "test")
    except Exception as e:  # the datasets library raises many types for "not reachable / not found"
        raise SourceError(f"cannot load hub dataset {hub!r} (config={config}, split={split}): {e}") from e
    yield from ds

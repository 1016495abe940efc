"""Reading raw rows from local files or the Hugging Face hub.

A line of a JSONL file that is not a row (not UTF-8, not JSON, cut short, not an object) comes
out as a `BadRow` naming its file and line, not as an error: the sources step turns it into a
reject and goes on, up to the source's `max_bad_rows`. A byte-order mark is simply skipped.
"""

from __future__ import annotations

import codecs
import json
import os
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
    reason: str  # invalid_utf8 | invalid_json | truncated_json | not_an_object
    detail: str

    @property
    def where(self) -> str:
        return f"{Path(self.file).name}:{self.line}"


def read_rows(path: str | os.PathLike | None = None, hub: str | None = None, config: str | None = None,
              split: str | None = None) -> Iterator[dict | BadRow]:
    """Rows as dicts (and BadRows for malformed lines): from a local JSONL / JSON / Parquet
    file, or a hub id through `datasets`."""
    if path is not None:
        yield from _read_local(Path(path))
    elif hub is not None:
        yield from _read_hub(hub, config, split)
    else:
        raise SourceError("a source needs `path` or `hub`")


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
        row = json.loads(line)
    except json.JSONDecodeError as e:
        if e.pos >= len(line.rstrip()) or e.msg.startswith("Unterminated string"):
            return BadRow(file, lineno, "truncated_json", "the line ends before its JSON value is complete")
        return BadRow(file, lineno, "invalid_json", f"not valid JSON: {e.msg} at column {e.colno}")
    if not isinstance(row, dict):
        return BadRow(file, lineno, "not_an_object", f"a JSON {type(row).__name__} where an object was expected")
    return row


def _read_local(path: Path) -> Iterator[dict | BadRow]:
    if not path.is_file():
        raise SourceError(f"source file not found: {path}")
    suffix = "".join(path.suffixes[-1:]).lower()
    if suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
                yield from batch.to_pylist()
        except (pa.ArrowException, OSError) as e:
            raise SourceError(f"{path}: not a readable Parquet file: {e}") from e
    elif suffix == ".jsonl":
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                row = parse_line(raw, str(path), lineno)
                if row is not None:
                    yield row
    elif suffix == ".json":
        try:
            data = json.loads(path.read_bytes().decode("utf-8-sig"))
        except UnicodeDecodeError as e:
            raise SourceError(f"{path}: byte {e.start} is not UTF-8 text") from e
        except json.JSONDecodeError as e:
            raise SourceError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from e
        if isinstance(data, dict):
            data = next((v for v in data.values() if isinstance(v, list)), None)
        if not isinstance(data, list):
            raise SourceError(f"{path}: expected a JSON list of objects")
        for index, row in enumerate(data, 1):
            yield row if isinstance(row, dict) else BadRow(
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

"""Reading raw rows from local files or the Hugging Face hub."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator


class SourceError(ValueError):
    """A source cannot be read; the message names the file or hub id."""


def read_rows(path: str | os.PathLike | None = None, hub: str | None = None, config: str | None = None,
              split: str | None = None) -> Iterator[dict]:
    """Rows as dicts: from a local JSONL / JSON / Parquet file, or a hub id through `datasets`."""
    if path is not None:
        yield from _read_local(Path(path))
    elif hub is not None:
        yield from _read_hub(hub, config, split)
    else:
        raise SourceError("a source needs `path` or `hub`")


def _read_local(path: Path) -> Iterator[dict]:
    if not path.is_file():
        raise SourceError(f"source file not found: {path}")
    suffix = "".join(path.suffixes[-1:]).lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
            yield from batch.to_pylist()
    elif suffix == ".jsonl":
        with path.open("r", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise SourceError(f"{path}:{lineno}: not valid JSON: {e.msg}") from e
                if not isinstance(row, dict):
                    raise SourceError(f"{path}:{lineno}: expected a JSON object per line")
                yield row
    elif suffix == ".json":
        data = json.loads(path.read_text("utf-8"))
        if isinstance(data, dict):
            data = next((v for v in data.values() if isinstance(v, list)), None)
        if not isinstance(data, list):
            raise SourceError(f"{path}: expected a JSON list of objects")
        yield from data
    else:
        raise SourceError(f"{path}: unsupported file type {suffix!r} (use .jsonl, .json or .parquet)")


def _read_hub(hub: str, config: str | None, split: str | None) -> Iterator[dict]:
    import datasets

    try:
        ds = datasets.load_dataset(hub, config, split=split or "test")
    except Exception as e:  # the datasets library raises many types for "not reachable / not found"
        raise SourceError(f"cannot load hub dataset {hub!r} (config={config}, split={split}): {e}") from e
    yield from ds

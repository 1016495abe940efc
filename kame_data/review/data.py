"""Reading a kame-data output folder for review: manifest, shards, rows and rejects.

Review tools read rows without their audio unless they play it, so inspecting or summarising a
large dataset does not decode gigabytes of WAV bytes.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import pyarrow.compute as pc
import pyarrow.parquet as pq

log = logging.getLogger(__name__)

META_COLUMNS = ("id", "item_id", "source", "category", "variant", "duration", "turns", "words", "oracle")


class ReviewError(ValueError):
    """The folder, an id or a filter does not fit the dataset; the message says what to do."""


@dataclass
class Dataset:
    out: Path
    manifest: dict[str, Any]

    @property
    def shard_paths(self) -> list[Path]:
        return [self.out / s["path"] for s in self.manifest["shards"]]

    def rows(self, columns: Iterable[str] | None = META_COLUMNS, ids: Iterable[str] | None = None
             ) -> Iterator[dict[str, Any]]:
        """Rows in dataset order; `columns=None` includes the audio; `ids` keeps only those rows."""
        wanted = set(ids) if ids is not None else None
        cols = list(columns) if columns is not None else None
        for path in self.shard_paths:
            table = pq.read_table(path, columns=cols)
            if wanted is not None:
                table = table.filter(pc.is_in(table["id"], value_set=_string_array(wanted)))
            yield from table.to_pylist()

    def ids(self) -> list[str]:
        return [r["id"] for r in self.rows(columns=["id"])]

    def rejects(self) -> list[dict[str, Any]]:
        """Every line of rejects.jsonl (an empty list when the file is absent)."""
        path = self.out / "rejects.jsonl"
        if not path.is_file():
            return []
        out = []
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    log.warning("%s line %d is not JSON; skipped in the review", path, n)
        return out


def _string_array(values: set[str]):
    import pyarrow as pa

    return pa.array(sorted(values), type=pa.string())


def open_dataset(out: str | Path) -> Dataset:
    """The dataset in `out`; a clear ReviewError when it is not a kame-data output folder."""
    out = Path(out)
    mpath = out / "manifest.json"
    if not mpath.is_file():
        raise ReviewError(f"{mpath} is missing: is {out} a kame-data output folder (from `kame-data run`)?")
    try:
        manifest = json.loads(mpath.read_text("utf-8"))
    except json.JSONDecodeError as e:
        raise ReviewError(f"{mpath} is not valid JSON: {e}") from e
    shards = manifest.get("shards")
    if not isinstance(shards, list) or not shards:
        raise ReviewError(f"{mpath} lists no shards")
    for s in shards:
        if not (out / s["path"]).is_file():
            raise ReviewError(f"shard {s['path']} listed in {mpath} is missing")
    return Dataset(out=out, manifest=manifest)

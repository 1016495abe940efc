"""Sharded Parquet output: each shard written whole, then all renamed to their final names."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kame_data.io.atomic import atomic_path
from kame_data.io.dataset import arrow_schema

STAGING = ".staging"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class ShardWriter:
    """Collects rows; every `rows_per_shard` rows become one zstd Parquet shard.

    Shards go to OUT/.staging first; `finish` gives them their final names
    `data/{split}-{i:05d}-of-{n:05d}.parquet` (n is known only then) and removes stale shards.
    """

    def __init__(self, out_dir: Path, split: str = "train", rows_per_shard: int = 100, row_group_size: int = 8):
        self.out_dir = Path(out_dir)
        self.split = split
        self.rows_per_shard = rows_per_shard
        self.row_group_size = row_group_size
        self.staging = self.out_dir / STAGING
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir(parents=True)
        self._rows: list[dict[str, Any]] = []
        self._staged: list[tuple[Path, int]] = []

    def add(self, row: dict[str, Any]) -> None:
        self._rows.append(row)
        if len(self._rows) >= self.rows_per_shard:
            self._flush()

    def _flush(self) -> None:
        if not self._rows:
            return
        table = pa.Table.from_pylist(self._rows, schema=arrow_schema())
        path = self.staging / f"shard-{len(self._staged):05d}.parquet"
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp, compression="zstd", row_group_size=self.row_group_size)
        self._staged.append((path, len(self._rows)))
        self._rows = []

    def finish(self) -> list[dict[str, Any]]:
        """Final shard names, row counts and checksums (for the manifest)."""
        self._flush()
        data = self.out_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        n = len(self._staged)
        final = []
        for i, (path, rows) in enumerate(self._staged):
            name = f"{self.split}-{i:05d}-of-{n:05d}.parquet"
            os.replace(path, data / name)
            final.append({"path": f"data/{name}", "split": self.split, "rows": rows, "sha256": _sha256(data / name)})
        keep = {Path(s["path"]).name for s in final}
        for old in data.glob("*.parquet"):
            if old.name not in keep:
                old.unlink()
        shutil.rmtree(self.staging, ignore_errors=True)
        return final

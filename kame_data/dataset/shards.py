"""Sharded Parquet output: deterministic splits by item, shards closed by row count or size.

Shards are written to OUT/.staging while open, then renamed to their final names
`data/{split}-{i:05d}-of-{n:05d}.parquet` in `finish` (n is known only then), so a crashed run
never leaves a half shard under data/.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from kame_data.dataset.rows import arrow_schema

STAGING = ".staging"
DEFAULT_ROWS_PER_SHARD = 100
ROW_GROUP_ROWS = 8  # small row groups: a streaming reader holds one group in memory
ROW_GROUP_BYTES = 32 << 20
SPLIT_SUM_TOLERANCE = 1e-6


class PublishConfigError(ValueError):
    """The recipe's `publish` section cannot be used; the message names the key."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def split_of(item_id: str, seed: int, fractions: list[tuple[str, float]]) -> str:
    """The split an item falls in: a hash of (seed, item_id) placed on the cumulative fractions.

    Hashing the item id (not the row id) keeps every spoken variant of one source item in one
    split, so no test question leaks into training through a second variant.
    """
    digest = hashlib.sha256(f"{seed}\x00{item_id}".encode("utf-8")).digest()
    u = int.from_bytes(digest[:8], "big") / 2.0**64
    acc = 0.0
    for name, frac in fractions:
        acc += frac
        if u < acc:
            return name
    return next(name for name, frac in reversed(fractions) if frac > 0)  # float rounding at 1.0


def split_fractions(publish: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The recipe's splits in recipe order: `publish.splits`, else the single `publish.split`."""
    splits = publish.get("splits")
    if splits and publish.get("split"):
        raise PublishConfigError("publish: give either `split` (one split) or `splits` (fractions), not both")
    if not splits:
        return [(publish.get("split", "train"), 1.0)]
    total = sum(splits.values())
    if abs(total - 1.0) > SPLIT_SUM_TOLERANCE:
        raise PublishConfigError(f"publish.splits: fractions must sum to 1, got {total:g} ({splits})")
    return [(name, float(frac)) for name, frac in splits.items()]


def row_bytes(row: dict[str, Any]) -> int:
    """Uncompressed size estimate of a row; compressed shards come out no larger than this."""
    audio = row.get("audio") or {}
    rest = {k: v for k, v in row.items() if k != "audio"}
    return len(audio.get("bytes") or b"") + len(json.dumps(rest, ensure_ascii=False, default=str))


@dataclass
class _OpenShard:
    """One shard being written: rows go out a row group at a time, so memory stays bounded."""

    path: Path
    writer: pq.ParquetWriter
    rows: int = 0
    bytes: int = 0
    pending: list[dict[str, Any]] = field(default_factory=list)
    pending_bytes: int = 0

    def add(self, row: dict[str, Any], size: int, group_rows: int) -> None:
        self.pending.append(row)
        self.pending_bytes += size
        self.rows += 1
        self.bytes += size
        if len(self.pending) >= group_rows or self.pending_bytes >= ROW_GROUP_BYTES:
            self.write_group()

    def write_group(self) -> None:
        if self.pending:
            table = pa.Table.from_pylist(self.pending, schema=arrow_schema())
            self.writer.write_table(table, row_group_size=len(self.pending))
            self.pending, self.pending_bytes = [], 0

    def close(self) -> None:
        self.write_group()
        self.writer.close()
        with open(self.path, "rb+") as fh:
            os.fsync(fh.fileno())


class ShardWriter:
    """Collects rows into zstd Parquet shards, one series per split.

    A shard closes when it holds `rows_per_shard` rows or when the next row would take it past
    `shard_size_mb` (whichever comes first). Rows are assigned to splits by `split_of(item_id)`.
    """

    def __init__(self, out_dir: Path, split: str = "train", rows_per_shard: int | None = DEFAULT_ROWS_PER_SHARD,
                 row_group_size: int = ROW_GROUP_ROWS, shard_size_mb: float | None = None,
                 splits: list[tuple[str, float]] | None = None, seed: int = 0):
        self.out_dir = Path(out_dir)
        self.fractions = splits or [(split, 1.0)]
        self.seed = seed
        if rows_per_shard is None and shard_size_mb is None:
            rows_per_shard = DEFAULT_ROWS_PER_SHARD
        self.rows_per_shard = rows_per_shard
        self.max_bytes = int(shard_size_mb * (1 << 20)) if shard_size_mb else None
        self.row_group_size = max(1, row_group_size)
        self.staging = self.out_dir / STAGING
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir(parents=True)
        self._open: dict[str, _OpenShard] = {}
        self._closed: dict[str, list[tuple[Path, int]]] = {name: [] for name, _ in self.fractions}

    @classmethod
    def from_publish(cls, out_dir: Path, publish: Mapping[str, Any], seed: int = 0) -> "ShardWriter":
        """A writer configured by a recipe's `publish` section (raises PublishConfigError)."""
        return cls(out_dir, rows_per_shard=publish.get("rows_per_shard"),
                   shard_size_mb=publish.get("shard_size_mb"),
                   row_group_size=publish.get("row_group_size", ROW_GROUP_ROWS),
                   splits=split_fractions(publish), seed=seed)

    @property
    def split_names(self) -> list[str]:
        return [name for name, _ in self.fractions]

    def split_of(self, item_id: str) -> str:
        return split_of(item_id, self.seed, self.fractions)

    def add(self, row: dict[str, Any]) -> str:
        """Append a row to its split's open shard; returns the split."""
        split = self.split_of(row["item_id"])
        size = row_bytes(row)
        shard = self._open.get(split)
        if shard is not None and self.max_bytes is not None and shard.bytes + size > self.max_bytes:
            self._close(split)
            shard = None
        if shard is None:
            path = self.staging / f"{split}-{len(self._closed[split]):05d}.parquet"
            shard = self._open[split] = _OpenShard(path, pq.ParquetWriter(path, arrow_schema(), compression="zstd"))
        shard.add(row, size, self.row_group_size)
        if self.rows_per_shard is not None and shard.rows >= self.rows_per_shard:
            self._close(split)
        return split

    def _close(self, split: str) -> None:
        shard = self._open.pop(split)
        shard.close()
        self._closed[split].append((shard.path, shard.rows))

    def finish(self) -> list[dict[str, Any]]:
        """Final shard names, splits, row counts, sizes and checksums (for the manifest)."""
        for split in list(self._open):
            self._close(split)
        data = self.out_dir / "data"
        data.mkdir(parents=True, exist_ok=True)
        final = []
        for split in self.split_names:
            staged = self._closed[split]
            for i, (path, rows) in enumerate(staged):
                name = f"{split}-{i:05d}-of-{len(staged):05d}.parquet"
                os.replace(path, data / name)
                final.append({"path": f"data/{name}", "split": split, "rows": rows,
                              "bytes": (data / name).stat().st_size, "sha256": sha256_file(data / name)})
        keep = {Path(s["path"]).name for s in final}
        for old in data.glob("*.parquet"):
            if old.name not in keep:
                old.unlink()
        shutil.rmtree(self.staging, ignore_errors=True)
        return final

"""Sharded Parquet output: deterministic splits by item, shards closed by row count or size.

Shards are written to OUT/.staging while open, then renamed to their final names
`data/{split}-{i:05d}-of-{n:05d}.parquet` in `finish` (n is known only then), so a crashed run
never leaves a half shard under data/. Rewriting a dataset without some rows (`exclude`) goes
through the same staging, naming and stale-shard cleanup.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass
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
SPLIT_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
SHARD_NAME = re.compile(r"^(?P<split>[a-z][a-z0-9_]*)-[0-9]{5}-of-[0-9]{5}\.parquet$")


class PublishConfigError(ValueError):
    """The recipe's `publish` section cannot be used; the message names the key."""


def check_split(name: object) -> str:
    """A split name, which becomes shard file names and export folders: never a path."""
    if not isinstance(name, str) or not SPLIT_NAME.match(name):
        raise PublishConfigError(f"publish: split name {name!r} must be lower-case letters, digits and _, "
                                 "starting with a letter (it names shard files and export folders)")
    return name


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


def shard_name(split: str, index: int, count: int) -> str:
    """The final file name of shard `index` of `count` in a split (the Hugging Face hub's pattern)."""
    return f"{check_split(split)}-{index:05d}-of-{count:05d}.parquet"


def shard_split(name: str) -> str | None:
    """The split a final shard name belongs to; None when the name is not a shard's."""
    m = SHARD_NAME.match(name)
    return m.group("split") if m else None


class ShardFile:
    """One shard being written: rows go out a row group at a time, so memory stays bounded.

    A group closes at `group_rows` rows or ROW_GROUP_BYTES, whichever comes first.
    """

    def __init__(self, path: Path, group_rows: int = ROW_GROUP_ROWS, arrival: bool = False):
        self.path = Path(path)
        self.group_rows = max(1, group_rows)
        self.schema = arrow_schema(arrival)  # with the oracle_arrival column under a latency model
        self.writer = pq.ParquetWriter(self.path, self.schema, compression="zstd")
        self.rows = self.bytes = self.pending_bytes = 0
        self.pending: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any], size: int | None = None) -> None:
        size = row_bytes(row) if size is None else size
        self.pending.append(row)
        self.pending_bytes += size
        self.rows += 1
        self.bytes += size
        if len(self.pending) >= self.group_rows or self.pending_bytes >= ROW_GROUP_BYTES:
            self.write_group()

    def write_group(self) -> None:
        if self.pending:
            table = pa.Table.from_pylist(self.pending, schema=self.schema)
            self.writer.write_table(table, row_group_size=len(self.pending))
            self.pending, self.pending_bytes = [], 0

    def close(self) -> None:
        self.write_group()
        self.writer.close()
        with open(self.path, "rb+") as fh:
            os.fsync(fh.fileno())


@dataclass
class StagedShard:
    """A finished shard file waiting for its final name under data/."""

    path: Path
    split: str
    rows: int
    sha256: str | None = None  # already known (a shard kept as it was); computed otherwise


def fresh_staging(out_dir: Path) -> Path:
    """OUT/.staging, emptied: where shards are written before they get their final names."""
    staging = Path(out_dir) / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    return staging


def describe_shards(staged: list[StagedShard]) -> list[dict[str, Any]]:
    """Manifest entries for `staged`: final names numbered per split in the order given, sizes, checksums."""
    counts = Counter(s.split for s in staged)
    index: Counter[str] = Counter()
    entries = []
    for s in staged:
        name = shard_name(s.split, index[s.split], counts[s.split])
        index[s.split] += 1
        entries.append({"path": f"data/{name}", "split": s.split, "rows": s.rows,
                        "bytes": s.path.stat().st_size, "sha256": s.sha256 or sha256_file(s.path)})
    return entries


def install_shards(out_dir: Path, staged: list[StagedShard], entries: list[dict[str, Any]]) -> None:
    """Rename each staged shard onto its entry's path, then delete every other shard under data/
    (stale ones from an earlier run) and the staging folder."""
    out_dir = Path(out_dir)
    data = out_dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    for s, entry in zip(staged, entries, strict=True):
        if s.path != out_dir / entry["path"]:
            os.replace(s.path, out_dir / entry["path"])
    keep = {Path(e["path"]).name for e in entries}
    for old in data.glob("*.parquet"):
        if old.name not in keep:
            old.unlink()
    shutil.rmtree(out_dir / STAGING, ignore_errors=True)


class ShardWriter:
    """Collects rows into zstd Parquet shards, one series per split.

    A shard closes when it holds `rows_per_shard` rows or when the next row would take it past
    `shard_size_mb` (whichever comes first). Rows are assigned to splits by `split_of(item_id)`.
    """

    def __init__(self, out_dir: Path, split: str = "train", rows_per_shard: int | None = DEFAULT_ROWS_PER_SHARD,
                 row_group_size: int = ROW_GROUP_ROWS, shard_size_mb: float | None = None,
                 splits: list[tuple[str, float]] | None = None, seed: int = 0, arrival: bool = False):
        self.out_dir = Path(out_dir)
        self.arrival = arrival
        self.fractions = [(check_split(name), frac) for name, frac in splits or [(split, 1.0)]]
        self.seed = seed
        if rows_per_shard is None and shard_size_mb is None:
            rows_per_shard = DEFAULT_ROWS_PER_SHARD
        self.rows_per_shard = rows_per_shard
        self.max_bytes = int(shard_size_mb * (1 << 20)) if shard_size_mb else None
        self.row_group_size = max(1, row_group_size)
        self.staging = fresh_staging(self.out_dir)
        self._open: dict[str, ShardFile] = {}
        self._closed: dict[str, list[StagedShard]] = {name: [] for name, _ in self.fractions}

    @classmethod
    def from_publish(cls, out_dir: Path, publish: Mapping[str, Any], seed: int = 0,
                     arrival: bool = False) -> "ShardWriter":
        """A writer configured by a recipe's `publish` section (raises PublishConfigError)."""
        return cls(out_dir, rows_per_shard=publish.get("rows_per_shard"),
                   shard_size_mb=publish.get("shard_size_mb"),
                   row_group_size=publish.get("row_group_size", ROW_GROUP_ROWS),
                   splits=split_fractions(publish), seed=seed, arrival=arrival)

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
            shard = self._open[split] = ShardFile(path, self.row_group_size, self.arrival)
        shard.add(row, size)
        if self.rows_per_shard is not None and shard.rows >= self.rows_per_shard:
            self._close(split)
        return split

    def _close(self, split: str) -> None:
        shard = self._open.pop(split)
        shard.close()
        self._closed[split].append(StagedShard(shard.path, split, shard.rows))

    def finish(self) -> list[dict[str, Any]]:
        """Final shard names, splits, row counts, sizes and checksums (for the manifest)."""
        for split in list(self._open):
            self._close(split)
        staged = [s for split in self.split_names for s in self._closed[split]]
        entries = describe_shards(staged)
        install_shards(self.out_dir, staged, entries)
        return entries

"""The writer's config (the recipe's `publish:` section)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from kame_data.config_schema import Schema

SplitName = Annotated[str, Schema(pattern="^[a-z][a-z0-9_]*$")]


@dataclass(frozen=True)
class PublishConfig:
    """How rows become Parquet shards and splits."""

    # Close a shard after this many rows (with no shard_size_mb either: the writer's default).
    rows_per_shard: Annotated[int, Schema(minimum=1)] | None = None
    # Close a shard before it passes this size (MiB, uncompressed estimate).
    shard_size_mb: Annotated[float, Schema(exclusiveMinimum=0)] | None = None
    row_group_size: Annotated[int, Schema(minimum=1)] = 8  # rows per Parquet row group (at most 32 MiB each)
    split: SplitName | None = None  # the single split's name (default train) …
    # … or split fractions, e.g. {train: 0.8, validation: 0.1, test: 0.1}, summing to 1 (checked by the
    # writer); each item's split comes from a hash of its id and the seed.
    splits: Annotated[dict[SplitName, Annotated[float, Schema(minimum=0, maximum=1)]],
                      Schema(minProperties=1)] | None = None

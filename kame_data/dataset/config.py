"""The writer's config (the recipe's `publish:` section)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PublishConfig:
    """The recipe's `publish:` section: how rows become shards and splits."""

    rows_per_shard: int | None = None  # None with no shard_size_mb either: the writer's default
    shard_size_mb: float | None = None
    row_group_size: int = 8
    split: str | None = None  # one split (default "train") …
    splits: dict[str, float] | None = None  # … or fractions by name, summing to 1 (checked by the writer)

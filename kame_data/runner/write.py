"""The write step: finished samples into sharded Parquet under OUT/data, in the order they arrive.

Stateful and not checkpointed (the shards are the output). Its output per sample is the small
summary the manifest's statistics are built from, so the audio is never held twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kame_data.dataset.rows import sample_row
from kame_data.dataset.shards import ShardWriter
from kame_data.dataset.stats import sample_figures
from kame_data.oracle.latency import IDEAL, LatencyModel
from kame_data.records import Sample
from kame_data.dataset.config import PublishConfig
from kame_data.runner.config import _plain
from kame_data.runner.manifest import dialogue_quality
from kame_data.step import Resources, RunContext, Step


class WriteStep(Step[Sample, dict]):
    name = "write"

    def __init__(self, config: PublishConfig, out_dir: Path, seed: int = 0, excluded: frozenset[str] = frozenset(),
                 latency: LatencyModel = IDEAL):
        super().__init__(config, RunContext(seed=seed))
        self.out_dir = Path(out_dir)
        self.latency = latency  # the oracle section's arrival model (rows gain oracle_arrival unless ideal)
        self.excluded = excluded  # row ids a reviewer left out (OUT/exclusions.jsonl): never written again
        self.writer: ShardWriter | None = None

    @property
    def resources(self) -> Resources:
        return Resources(checkpoint=False)

    def setup(self) -> None:
        """Raises PublishConfigError for a bad `publish:` section, before any work is done."""
        if self.writer is None:
            from dataclasses import asdict

            self.writer = ShardWriter.from_publish(self.out_dir, _plain(asdict(self.config)), self.seed,
                                                   arrival=not self.latency.ideal)

    def run(self, batch: list[Sample]) -> list[list[dict[str, Any]]]:
        assert self.writer is not None, "the runner calls setup() before run()"
        out = []
        for sample in batch:
            if sample.id in self.excluded:
                out.append([])
                continue
            row = sample_row(sample, self.latency, self.seed)
            self.writer.add(row)
            out.append([{"id": row["id"], **sample_figures(row), "quality": dialogue_quality(sample.rendered)}])
        return out

    def finish(self) -> list[dict[str, Any]]:
        """Close every shard and give them their final names; the manifest's `shards`."""
        assert self.writer is not None, "the runner calls setup() before finish()"
        return self.writer.finish()

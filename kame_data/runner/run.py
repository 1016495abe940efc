"""One runner for every recipe: batches flow through the stages; the runner keeps counts,
timings, rejects and progress, and writes every output file atomically."""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol

from kame_data.io.atomic import write_jsonl
from kame_data.io.dataset import sample_row
from kame_data.io.shards import ShardWriter
from kame_data.oracle.stage import OracleConfig, OracleStage
from kame_data.recipe import Recipe, build_config
from kame_data.records import Reject, Sample
from kame_data.runner.manifest import build_manifest, write_outputs
from kame_data.script.stage import ScriptStage
from kame_data.script.template import ScriptConfig
from kame_data.sources import load_items
from kame_data.speech.stage import SpeakConfig, SpeakStage

log = logging.getLogger("kame_data.runner")


class RunError(RuntimeError):
    """The run could not produce a dataset; the message says why and where to look."""


class Stage(Protocol):
    name: str

    def open(self) -> None: ...

    def process(self, batch: list) -> list: ...


class Bar(Protocol):
    def update(self, n: int) -> None: ...

    def close(self) -> None: ...


ProgressFactory = Callable[[str, int], Bar]


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass
class RunResult:
    out_dir: Path
    manifest: dict[str, Any]
    rejects: list[Reject]

    @property
    def rows(self) -> int:
        return sum(s["rows"] for s in self.manifest["shards"])


def build_stages(recipe: Recipe, cache=None) -> list[Stage]:
    return [
        ScriptStage(build_config(ScriptConfig, recipe.script), recipe.seed),
        SpeakStage(build_config(SpeakConfig, recipe.speak), recipe.seed),
        OracleStage(build_config(OracleConfig, recipe.oracle), cache=cache),
    ]


def _chunks(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i: i + size]


def run_recipe(recipe: Recipe, out_dir: str | Path, limit: int | None = None,
               progress: ProgressFactory | None = None, use_cache: bool = True,
               stages: list[Stage] | None = None) -> RunResult:
    """Run a recipe end to end into `out_dir` (data/ shards, README.md card, manifest.json, rejects.jsonl)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(out_dir / "run.log", mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("kame_data")
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    cache = None
    try:
        if stages is None:
            if use_cache:
                from kame_data.llm.cache import RequestCache, default_cache_path

                cache = RequestCache(default_cache_path())
            stages = build_stages(recipe, cache)
        return _run(recipe, out_dir, limit, progress, stages)
    finally:
        if cache is not None:
            cache.close()
        root.removeHandler(handler)
        handler.close()


def _run(recipe: Recipe, out_dir: Path, limit: int | None, progress: ProgressFactory | None,
         stages: list[Stage]) -> RunResult:
    started = time.perf_counter()
    progress = progress or (lambda name, total: _NoBar())
    t = time.perf_counter()
    items, rejects = load_items(recipe, limit)
    timings: dict[str, float] = {"sources": time.perf_counter() - t}
    counts: Counter[str] = Counter({"sources": len(items)})
    log.info("run %s: %d items -> %s", recipe.name, len(items), out_dir)
    if not items:
        write_jsonl(out_dir / "rejects.jsonl", [r.to_dict() for r in rejects])
        raise RunError(f"no source items to process ({len(rejects)} rejected; see {out_dir / 'rejects.jsonl'})")

    publish_cfg = recipe.publish
    writer = ShardWriter(out_dir, split=publish_cfg.get("split", "train"),
                         rows_per_shard=publish_cfg.get("rows_per_shard", 100))
    bars = {s.name: progress(s.name, len(items)) for s in stages}
    samples_meta: list[dict[str, Any]] = []
    try:
        for stage in stages:
            t = time.perf_counter()
            stage.open()
            timings[stage.name] = time.perf_counter() - t
        for batch in _chunks(items, recipe.batch_size):
            width = len(batch)
            for stage in stages:
                t = time.perf_counter()
                out = stage.process(batch) if batch else []
                timings[stage.name] += time.perf_counter() - t
                batch = [r for r in out if not isinstance(r, Reject)]
                rejects.extend(r for r in out if isinstance(r, Reject))
                counts[stage.name] += len(batch)
                bars[stage.name].update(width)
            t = time.perf_counter()
            for sample in batch:
                assert isinstance(sample, Sample)
                row = sample_row(sample)
                writer.add(row)
                samples_meta.append({"source": row["source"], "duration": row["duration"],
                                     "levels": [e["level"] for e in row["oracle"]]})
            timings["publish"] = timings.get("publish", 0.0) + time.perf_counter() - t
    finally:
        for b in bars.values():
            b.close()

    write_jsonl(out_dir / "rejects.jsonl", [r.to_dict() for r in rejects])
    if not samples_meta:
        raise RunError(f"every item was rejected; see {out_dir / 'rejects.jsonl'}")
    t = time.perf_counter()
    shards = writer.finish()
    timings["publish"] = timings.get("publish", 0.0) + time.perf_counter() - t
    timings["total"] = time.perf_counter() - started
    oracle = next((s for s in stages if s.name == "oracle"), None)
    backend = getattr(oracle, "backend", None)
    manifest = build_manifest(recipe, counts, rejects, timings, shards, samples_meta, backend)
    write_outputs(out_dir, recipe, manifest)
    log.info("wrote %d rows in %d shards to %s", manifest["counts"]["samples"], len(shards), out_dir)
    return RunResult(out_dir=out_dir, manifest=manifest, rejects=rejects)

"""One runner for every recipe: batches flow through the stages; the runner keeps counts,
timings, rejects and progress, and writes every output file atomically."""

from __future__ import annotations

import faulthandler
import logging
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol

from kame_data.atomic import write_json, write_jsonl
from kame_data.dataset.rows import sample_row
from kame_data.dataset.shards import PublishConfigError, ShardWriter
from kame_data.llm.accounting import BudgetExceeded
from kame_data.llm.limits import BackendUnavailable
from kame_data.llm.openai_backend import BackendConfigError
from kame_data.oracle.metrics import token_f1, true_replies
from kame_data.oracle.stage import OracleConfig, OracleStage
from kame_data.recipe import Recipe, build_config
from kame_data.records import Reject
from kame_data.runner.checkpoint import CheckpointStore, Keyed, config_key, item_key
from kame_data.runner.keyed import Stage, apply_stage
from kame_data.runner.manifest import (
    build_manifest,
    dialogue_quality,
    quality_summary,
    write_outputs,
)
from kame_data.script.stage import ScriptStage
from kame_data.script.template import ScriptConfig
from kame_data.sources import load_items
from kame_data.speech.stage import SpeakConfig, SpeakStage
from kame_data.workers import FAULT_LOG_ENV, EngineCrashed

log = logging.getLogger("kame_data.runner")


class RunError(RuntimeError):
    """The run could not produce a dataset; the message says why and where to look."""


class Bar(Protocol):
    def update(self, n: int) -> None: ...

    def close(self) -> None: ...


ProgressFactory = Callable[[str, int], Bar]
EXECUTORS = ("local", "ray")


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
        ScriptStage(build_config(ScriptConfig, recipe.script), recipe.seed, cache=cache),
        SpeakStage(build_config(SpeakConfig, recipe.speak), recipe.seed),
        OracleStage(build_config(OracleConfig, recipe.oracle), cache=cache),
    ]


def stage_keys(stages: list[Stage]) -> list[str]:
    """Each stage's identity for checkpoints: its name, config and seed."""
    keys = []
    for s in stages:
        cfg = getattr(s, "cfg", None)
        keys.append(config_key(s.name, {"config": asdict(cfg) if is_dataclass(cfg) else cfg,
                                        "seed": getattr(s, "seed", None)}))
    return keys


def _chunks(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i: i + size]


def _clean_partial_files(out_dir: Path) -> None:
    """Temporary files a killed run left behind (completed files are always renamed into place)."""
    for pattern in (".*.tmp", "data/.*.tmp", ".checkpoints/*/*/.*.tmp"):
        for p in out_dir.glob(pattern):
            p.unlink(missing_ok=True)


def run_recipe(recipe: Recipe, out_dir: str | Path, limit: int | None = None,
               progress: ProgressFactory | None = None, use_cache: bool = True,
               stages: list[Stage] | None = None, executor: str = "local", ray_address: str | None = None,
               resume: bool = True) -> RunResult:
    """Run a recipe end to end into `out_dir` (data/ shards, README.md card, manifest.json,
    rejects.jsonl, run.log, progress.json).

    Every stage's result per item is checkpointed under OUT/.checkpoints, so a rerun after a crash
    or kill redoes nothing that finished (`resume=False` ignores them)."""
    if executor not in EXECUTORS:
        raise RunError(f"unknown executor {executor!r} (available: {', '.join(EXECUTORS)})")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clean_partial_files(out_dir)
    handler = logging.FileHandler(out_dir / "run.log", mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("kame_data")
    root.addHandler(handler)
    # A native crash leaves its Python stack in run.log, here and in every worker process.
    faulthandler.enable(file=handler.stream, all_threads=True)
    os.environ[FAULT_LOG_ENV] = str((out_dir / "run.log").resolve())
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    cache = None
    cache_path = None
    try:
        if use_cache:
            from kame_data.llm.cache import RequestCache, default_cache_path

            cache_path = default_cache_path()
        if stages is None:
            cache = RequestCache(cache_path) if cache_path else None
            stages = build_stages(recipe, cache)
        store = CheckpointStore(out_dir / ".checkpoints") if resume else None
        return _run(recipe, out_dir, limit, progress, stages, store, executor, ray_address, cache_path)
    finally:
        if cache is not None:
            cache.close()
        faulthandler.disable()
        os.environ.pop(FAULT_LOG_ENV, None)
        root.removeHandler(handler)
        handler.close()


class _Progress:
    """progress.json: how far a run got, per stage (read by `kame-data status`)."""

    def __init__(self, out_dir: Path, recipe: Recipe, items: int, stage_names: list[str], executor: str):
        self.path = out_dir / "progress.json"
        self.state = {"recipe": recipe.name, "config_hash": recipe.config_hash, "executor": executor,
                      "items": items, "state": "running", "started": time.time(),
                      "stages": {n: {"inputs": 0, "outputs": 0, "computed": 0} for n in stage_names},
                      "samples": 0, "rejects": 0}

    def save(self, **changes) -> None:
        self.state.update(changes, updated=time.time())
        write_json(self.path, self.state)


def _local(stages: list[Stage], keys: list[str], items: list[Keyed], store: CheckpointStore | None,
           batch_size: int, bars: dict[str, Bar], timings: dict[str, float], progress: _Progress,
           stop: dict[str, str]) -> Iterator[Keyed]:
    """Batches flow through all stages in turn; each batch's last-stage outputs are yielded."""
    for stage in stages:
        timings[stage.name] = 0.0
    for batch in _chunks(items, batch_size):
        for stage, key in zip(stages, keys):
            t = time.perf_counter()
            live = sum(1 for k in batch if not isinstance(k.record, Reject))
            try:
                batch, computed = apply_stage(stage, key, batch, store)
            except BudgetExceeded as e:
                # Stop cleanly: what is finished gets published; paid answers stay in the cache.
                log.warning("%s; stopping and publishing what is done", e)
                stop["reason"] = f"budget: {e}"
                return
            timings[stage.name] += time.perf_counter() - t
            st = progress.state["stages"][stage.name]
            st["inputs"] += live
            st["computed"] += computed
            st["outputs"] += sum(1 for k in batch if not isinstance(k.record, Reject))
            bars[stage.name].update(live)
        yield from batch


def _run(recipe: Recipe, out_dir: Path, limit: int | None, progress_factory: ProgressFactory | None,
         stages: list[Stage], store: CheckpointStore | None, executor: str, ray_address: str | None,
         cache_path: Path | None) -> RunResult:
    started = time.perf_counter()
    progress_factory = progress_factory or (lambda name, total: _NoBar())
    t = time.perf_counter()
    items, rejects = load_items(recipe, limit)
    timings: dict[str, float] = {"sources": time.perf_counter() - t}
    log.info("run %s (%s executor): %d items -> %s", recipe.name, executor, len(items), out_dir)
    if not items:
        write_jsonl(out_dir / "rejects.jsonl", [r.to_dict() for r in rejects])
        raise RunError(f"no source items to process ({len(rejects)} rejected; see {out_dir / 'rejects.jsonl'})")
    try:
        writer = ShardWriter.from_publish(out_dir, recipe.publish, recipe.seed)
    except PublishConfigError as e:
        raise RunError(f"recipe {recipe.name}: {e}") from e

    names = [s.name for s in stages]
    keys = stage_keys(stages)
    progress = _Progress(out_dir, recipe, len(items), names, executor)
    progress.save()
    keyed_items = [Keyed(item_key(it), it) for it in items]
    stop: dict[str, str] = {}
    bars: dict[str, Bar] = {}
    samples_meta: list[dict[str, Any]] = []
    try:
        if executor == "local":
            bars = {n: progress_factory(n, len(items)) for n in names}
            outputs = _local(stages, keys, keyed_items, store, recipe.batch_size, bars, timings, progress, stop)
        else:
            from kame_data.runner.ray_executor import run_on_ray

            bars = {"ray": progress_factory("ray", len(items))}
            outputs = run_on_ray(recipe, names, keyed_items, store, cache_path, ray_address)
        t_pub = 0.0
        for k in outputs:
            if isinstance(k.record, Reject):
                rejects.append(k.record)
                continue
            t = time.perf_counter()
            row = sample_row(k.record)
            writer.add(row)
            replies = true_replies(row["words"], row["oracle"])
            samples_meta.append({"source": row["source"], "duration": row["duration"],
                                 "levels": [e["level"] for e in row["oracle"]],
                                 "f1": [token_f1(e["prediction"], r) for e, r in zip(row["oracle"], replies)],
                                 "quality": dialogue_quality(k.record.rendered)})
            t_pub += time.perf_counter() - t
            if executor != "local":
                bars["ray"].update(1)
            if len(samples_meta) % max(recipe.batch_size, 1) == 0:
                progress.save(samples=len(samples_meta), rejects=len(rejects))
        timings["publish"] = t_pub
    except (BackendUnavailable, BackendConfigError, EngineCrashed) as e:
        log.error("aborted: %s", e)
        write_jsonl(out_dir / "rejects.jsonl", [r.to_dict() for r in rejects])
        progress.save(state="failed", error=str(e))
        raise RunError(f"aborted: {e} (finished items are checkpointed: rerun the same command to resume)") from e
    finally:
        for b in bars.values():
            b.close()

    write_jsonl(out_dir / "rejects.jsonl", [r.to_dict() for r in rejects])
    if not samples_meta:
        progress.save(state="failed", error="every item was rejected")
        raise RunError(f"every item was rejected; see {out_dir / 'rejects.jsonl'}")
    t = time.perf_counter()
    shards = writer.finish()
    timings["publish"] = timings.get("publish", 0.0) + time.perf_counter() - t
    timings["total"] = time.perf_counter() - started
    counts: Counter[str] = Counter({"sources": len(items)})
    for n in names:
        counts[n] = progress.state["stages"][n]["outputs"] if executor == "local" else 0
    oracle = next((s for s in stages if s.name == "oracle"), None)
    backend = getattr(oracle, "backend", None) if executor == "local" else None
    manifest = build_manifest(recipe, counts, rejects, timings, shards, samples_meta, backend)
    manifest["quality"] = quality_summary(samples_meta)
    manifest["executor"] = executor
    manifest["computed"] = {n: progress.state["stages"][n]["computed"] for n in names} if executor == "local" else {}
    if stop:
        manifest["stopped"] = stop["reason"]
    write_outputs(out_dir, manifest)
    progress.save(state="stopped" if stop else "done", samples=len(samples_meta), rejects=len(rejects))
    log.info("wrote %d rows in %d shards to %s", manifest["counts"]["samples"], len(shards), out_dir)
    return RunResult(out_dir=out_dir, manifest=manifest, rejects=rejects)

"""One runner for every recipe: the sources step feeds batches to an executor, whose last outputs
go to the write step; the runner keeps counts, timings, rejects and progress, and writes every
output file atomically."""

from __future__ import annotations

import faulthandler
import logging
import os
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from kame_data import accelerator
from kame_data.atomic import write_jsonl
from kame_data.costs import piece
from kame_data.dataset.exclude import REASON as REVIEW_REASON
from kame_data.dataset.exclude import read_exclusions, review_rejects
from kame_data.dataset.owner import FolderLock, claim_folder
from kame_data.dataset.shards import PublishConfigError
from kame_data.errors import RunAbort
from kame_data.llm.accounting import BudgetExceeded
from kame_data.recipe import Recipe
from kame_data.records import Reject, reasons_line
from kame_data.runner.checkpoint import CheckpointStore, Keyed, item_key
from kame_data.runner.config import RunConfig
from kame_data.runner.executor import RunStats, StepCounts
from kame_data.runner.item_errors import ItemErrors, TooManyItemErrors
from kame_data.runner.manifest import build_manifest, llm_usage, quality_summary, write_outputs
from kame_data.runner.progress import Progress
from kame_data.runner.until import choices as until_choices
from kame_data.runner.until import stages_until, summary_key, write_partial
from kame_data.runner.write import WriteStep
from kame_data.schema import validate
from kame_data.scrub import ScrubbingFormatter, register_secret, scrub
from kame_data.script.template import script_checks
from kame_data.sources.step import SourcesStep
from kame_data.step import RunContext, Step
from kame_data.workers import FAULT_LOG_ENV

log = logging.getLogger("kame_data.runner")

EXECUTORS = ("local", "ray")


class RunError(RuntimeError):
    """The run could not produce a dataset; the message says why and where to look."""


class RunStopped(RunError):
    """The run stopped before the end (a service down, an engine crash, too many item errors)
    after publishing what it had finished: `result` is that dataset, the message says why and
    how to resume."""

    def __init__(self, message: str, result: "RunResult"):
        super().__init__(message)
        self.result = result


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
        return sum(s["rows"] for s in self.manifest.get("shards", []))


def _batches(items: list[Keyed], size: int) -> Iterator[list[Keyed]]:
    for i in range(0, len(items), max(1, size)):
        yield items[i: i + size]


def _clean_partial_files(out_dir: Path, patterns=(".*.tmp", "data/.*.tmp", ".checkpoints/*/*/.*.tmp"),
                         min_age_s: float = 0.0) -> None:
    """Temporary files a killed run left behind (completed files are always renamed into place).
    `min_age_s` spares files still being written by another run sharing the folder."""
    now = time.time()
    for pattern in patterns:
        for p in out_dir.glob(pattern):
            try:
                if now - p.stat().st_mtime >= min_age_s:
                    p.unlink(missing_ok=True)
            except FileNotFoundError:
                pass


def _executor(name: str, config: RunConfig, address: str | None, cache_path: str | None,
              runtime_env: dict | None = None, actors: int = 1):
    if name == "local":
        from kame_data.runner.local import LocalExecutor

        return LocalExecutor()
    from kame_data.runner.ray_executor import RayExecutor

    return RayExecutor(config, address, cache_path, runtime_env, actors)


def run_recipe(recipe: Recipe | RunConfig, out_dir: str | Path, force: bool = False, **options: Any) -> RunResult:
    """`_run_recipe` as the one owner of OUT: its lock is taken first, so a second run into OUT is
    refused (FolderBusy) before it reads a source or pays for a call, and OUT is claimed for the
    recipe (FolderClaimed when it holds another recipe's output; `force` deletes that output).
    `recipe`: a loaded recipe, resolved here before OUT is touched, or one already resolved."""
    config = recipe if isinstance(recipe, RunConfig) else RunConfig.resolve(recipe)
    out_dir = Path(out_dir)
    with FolderLock.acquire(out_dir, "run"):
        claim_folder(out_dir, config.name, force)
        return _run_recipe(config, out_dir, **options)


def _run_recipe(config: RunConfig, out_dir: str | Path, limit: int | None = None,
               progress: ProgressFactory | None = None, use_cache: bool = True,
               stages: list[Step] | None = None, executor: str = "local", ray_address: str | None = None,
               resume: bool = True, until: str | None = None, checkpoints: str | None = None,
               llm_cache: str | None = None, ray_runtime_env: dict | None = None, ray_actors: int = 1) -> RunResult:
    """Run a recipe into `out_dir` (data/ shards, README.md card, manifest.json, rejects.jsonl,
    run.log, progress.json); with `until`, stop after that stage and write what it produced in a
    readable form instead (see runner/until.py).

    Every stage's result per item is checkpointed under OUT/.checkpoints, so a rerun after a crash
    or kill redoes nothing that finished (`resume=False` ignores them). `checkpoints` and `llm_cache`
    put them, and the LLM answer cache, on storage every node of a cluster sees (a shared path or an
    object-store URL); `ray_runtime_env` is merged into the Ray workers' runtime_env."""
    if executor not in EXECUTORS:
        raise RunError(f"unknown executor {executor!r} (available: {', '.join(EXECUTORS)})")
    if until is not None and until not in until_choices():
        raise RunError(f"--until {until!r}: choose one of {', '.join(until_choices())}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clean_partial_files(out_dir)
    handler = logging.FileHandler(out_dir / "run.log", mode="a", encoding="utf-8")
    handler.setFormatter(ScrubbingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("kame_data")
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    # A native crash leaves its Python stack in run.log, here and in every worker process.
    faulthandler.enable(file=handler.stream, all_threads=True)
    os.environ[FAULT_LOG_ENV] = str((out_dir / "run.log").resolve())
    device_before = os.environ.get(accelerator.ENV)
    os.environ[accelerator.ENV] = config.recipe.device  # before any step or worker loads a model
    cache = None
    for backend in config.backends():
        register_secret(os.environ.get(backend.api_key_env))  # never in a log, progress.json or card
    try:
        try:
            from kame_data.speech import whisper

            error = accelerator.settle(whisper.gpu_error)
            if error:
                log.warning("Whisper cannot run on the GPU CTranslate2 sees (%s): it runs on the CPU", error)
            accelerator.placement()
        except accelerator.DeviceUnavailable as e:
            raise RunError(str(e)) from None
        cache_path = None
        if use_cache:
            from kame_data.llm.cache import default_cache_path

            cache_path = str(llm_cache or default_cache_path())
        if stages is None:
            from kame_data.llm.cache import open_cache

            cache = open_cache(cache_path) if cache_path else None
            stages = config.build_steps(RunContext(seed=config.seed, cache=cache, meter=config.meter()))
            if executor == "local":  # Ray spreads steps over its own processes
                from kame_data.runner.pooled import pooled

                stages = pooled(stages, config.recipe.workers)
        store = CheckpointStore(checkpoints or out_dir / ".checkpoints") if resume else None
        if store is not None and checkpoints and store.storage.is_local:
            # A killed run's half-written checkpoints; a shared folder may hold another live run's.
            _clean_partial_files(store.storage.root, ("*/*/.*.tmp",), min_age_s=3600)
        run = _Run(config, out_dir, progress or (lambda name, total: _NoBar()), store)
        return run.execute(limit, stages, _executor(executor, config, ray_address, cache_path, ray_runtime_env,
                                                    ray_actors),
                           until)
    except BaseException as e:
        # The terminal gets one line (the CLI's); the traceback goes to run.log only.
        handler.handle(log.makeRecord(log.name, logging.ERROR, __file__, 0, "run failed: %s: %s",
                                      (type(e).__name__, e), sys.exc_info()))
        raise
    finally:
        if cache is not None:
            cache.close()
        faulthandler.disable()
        os.environ.pop(FAULT_LOG_ENV, None)
        os.environ.pop(accelerator.WHISPER_ENV, None)
        if device_before is None:
            os.environ.pop(accelerator.ENV, None)
        else:
            os.environ[accelerator.ENV] = device_before
        root.removeHandler(handler)
        handler.close()


def _transient(rejects: list[Reject]) -> int:
    return sum(1 for r in rejects if r.transient)


class _Run:
    """One execution of a recipe: its progress, rejects and timings, then its outputs."""

    def __init__(self, config: RunConfig, out_dir: Path, bars: ProgressFactory, store: CheckpointStore | None):
        self.config, self.out_dir, self.make_bar, self.store = config, out_dir, bars, store
        self.rejects: list[Reject] = []
        self.timings: dict[str, float] = {}
        # CPU seconds per step: its worker processes' where it has them, else the driver threads' that
        # ran its batches (the writer: the driver's main thread while it writes)
        self.cpu: dict[str, float] = {}
        self.excluded = read_exclusions(out_dir)  # a reviewer's: kept out, their rejects kept in
        self.allocation: dict[str, dict] = {}  # per source asking `dialogues`: sources/allocate.py

    def _spent(self, name: str, wall_start: float, cpu_start: float) -> None:
        """Add the time since (wall_start, cpu_start) to a driver-side step's timing and CPU."""
        self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - wall_start
        self.cpu[name] = self.cpu.get(name, 0.0) + time.thread_time() - cpu_start

    def _write_rejects(self) -> None:
        write_jsonl(self.out_dir / "rejects.jsonl", [{**r.to_dict(), "detail": scrub(r.detail)} for r in self.rejects])

    def _fail(self, message: str, progress: Progress | None = None) -> RunError:
        message = scrub(message)
        self._write_rejects()
        if progress is not None:
            progress.save(state="failed", error=message)
        return RunError(message)

    def execute(self, limit: int | None, stages: list[Step], executor, until: str | None) -> RunResult:
        started = time.perf_counter()
        sources = SourcesStep(self.config.recipe, self.config.filters, limit, **script_checks(self.config))
        items, self.rejects = sources.items()
        self.allocation = {name: a.to_dict() for name, a in sources.allocations.items()}
        self.rejects += review_rejects(self.excluded)
        self.timings[SourcesStep.name] = time.perf_counter() - started
        log.info("run %s (%s executor): %d items -> %s", self.config.name, executor.name, len(items), self.out_dir)
        errors = ItemErrors(self.config.recipe.max_item_errors, len(items))
        try:
            errors.add(self.rejects)
        except TooManyItemErrors as e:
            raise self._fail(str(e)) from e
        if not items:
            raise self._fail(f"no source items to process ({len(self.rejects)} rejected: {reasons_line(self.rejects)}; "
                             f"see {self.out_dir / 'rejects.jsonl'})")
        if until is not None:
            stages = stages_until(stages, until)
        writer = None if until else WriteStep(self.config.publish, self.out_dir, self.config.seed,
                                              frozenset(self.excluded), self.config.oracle.latency_model)
        try:
            if writer is not None:
                writer.setup()
        except PublishConfigError as e:
            raise RunError(f"recipe {self.config.name}: {e}") from e
        names = [s.name for s in stages]
        progress = Progress(self.out_dir, self.config, len(items), names, executor.name)
        progress.save()
        bars = {n: self.make_bar(n, len(items)) for n in names}
        stats = RunStats()

        def on_batch(name: str, counts: StepCounts) -> None:
            progress.add(name, counts)
            bars[name].update(counts.inputs)

        keyed = [Keyed(item_key(it), it) for it in items]
        outputs: list[Any] = []  # until-mode records, or write-step summaries
        stop = ""
        aborted = False  # stopped by something other than the budget: the run did not do what was asked
        try:
            for batch in executor.run(stages, _batches(keyed, self.config.batch_size), self.store, stats, on_batch):
                t, c = time.perf_counter(), time.thread_time()
                records = [k.record for k in batch if not isinstance(k.record, Reject)]
                rejected = [k.record for k in batch if isinstance(k.record, Reject)]
                self.rejects.extend(rejected)
                with piece("write"):
                    outputs.extend(records if writer is None else [m for g in writer.run(records) for m in g])
                errors.add(rejected)  # after the batch's records are written: a stop here publishes them
                self._spent("write", t, c)
                progress.save(samples=len(outputs), rejects=len(self.rejects), transient=_transient(self.rejects))
        except BudgetExceeded as e:
            # Stop cleanly: what is finished gets published; paid answers stay in the cache.
            log.warning("%s; stopping and publishing what is done", e)
            stop = f"budget: {e}"
        except (RunAbort, TooManyItemErrors) as e:
            # A service down or refusing the key, an engine crash, a systematic bug: not one item's
            # fault. What is finished is published all the same, exactly as a budget stop does.
            stop, aborted = f"{'stopped' if isinstance(e, TooManyItemErrors) else 'aborted'}: {scrub(e)}", True
            log.warning("%s; publishing what is done", stop)
        finally:
            for b in bars.values():
                b.close()
            # before teardown, while the steps' worker processes still exist
            for s in stages:
                own = s.worker_cpu_seconds()
                self.cpu[s.name] = round(own if own is not None else stats.counts.get(s.name, StepCounts()).cpu, 2)
            for s in stages:
                s.teardown()
        for name in names:
            self.timings[name] = stats.counts.get(name, StepCounts()).seconds
        self._write_rejects()
        transient = _transient(self.rejects)
        if transient:
            log.warning("%d rejects are transient (server, engine or budget failures): rerun the same command "
                        "to retry them", transient)
        if not outputs and aborted:
            raise self._fail(f"{stop} (finished items are checkpointed: rerun the same command to resume)", progress)
        if until is not None:
            path = write_partial(self.out_dir, until, outputs)
            progress.save(state="stopped" if aborted else "done", samples=len(outputs), rejects=len(self.rejects),
                          transient=transient, **({"stopped": stop} if aborted else {}))
            log.info("stopped after %s: %d records in %s", until, len(outputs), path)
            result = RunResult(out_dir=self.out_dir, manifest={"until": until, "records": len(outputs),
                                                                "path": str(path), "allocation": self.allocation},
                               rejects=self.rejects)
            if aborted:
                raise RunStopped(f"{stop}; wrote the {len(outputs)} records finished before it to {path}; rerun "
                                 "the same command to resume (finished items are checkpointed)", result)
            return result
        if not outputs and stop:
            raise self._fail(f"{stop}; no dialogue was finished before it (answers paid for are cached: raise "
                             "oracle.budget_usd and rerun the same command to continue)", progress)
        if not outputs:
            raise self._fail(f"every item was rejected ({reasons_line(self.rejects)}); see {self.out_dir / 'rejects.jsonl'}",
                             progress)
        t, c = time.perf_counter(), time.thread_time()
        with piece("write"):
            shards = writer.finish()
        self._spent("write", t, c)
        self.cpu["write"] = round(self.cpu.get("write", 0.0), 2)
        self.timings["total"] = time.perf_counter() - started
        manifest = self._manifest(len(items), names, stats, shards, outputs, executor.name, stop, errors)
        write_outputs(self.out_dir, manifest)
        progress.save(state="stopped" if stop else "done", samples=len(outputs), rejects=len(self.rejects),
                      transient=transient, **({"stopped": stop} if stop else {}))
        log.info("wrote %d rows in %d shards to %s", manifest["counts"]["samples"], len(shards), self.out_dir)
        result = RunResult(out_dir=self.out_dir, manifest=manifest, rejects=self.rejects)
        if aborted:
            raise RunStopped(f"{stop}; published the {len(outputs)} dialogues finished before it ({len(items)} "
                             "items in the run); rerun the same command to resume (finished items are "
                             "checkpointed)", result)
        return result

    def _manifest(self, items: int, names: list[str], stats: RunStats, shards: list[dict[str, Any]],
                  samples: list[dict[str, Any]], executor: str, stop: str, errors: ItemErrors) -> dict[str, Any]:
        from collections import Counter

        counts: Counter[str] = Counter({SourcesStep.name: items})
        for n in names:
            counts[n] = stats.counts.get(n, StepCounts()).outputs
        counts.update({REVIEW_REASON: len(self.excluded)} if self.excluded else {})
        manifest = build_manifest(self.config.recipe, counts, self.rejects, self.timings, shards, samples)
        manifest.update({"review": {"excluded": sorted(self.excluded)}} if self.excluded else {})
        manifest["recipe"] = self.config.to_dict()  # the resolved recipe: every default filled in
        if self.allocation:  # each source's dialogues asked, handed out and short, with the reasons
            manifest["allocation"] = self.allocation
        manifest["config_hash"] = self.config.config_hash
        manifest["quality"] = quality_summary(samples, self.rejects)
        manifest["executor"] = executor
        manifest["computed"] = {n: stats.counts.get(n, StepCounts()).computed for n in names}
        manifest["retried"] = {n: stats.counts.get(n, StepCounts()).retried for n in names}
        manifest["rejects_transient"] = dict(sorted(Counter(r.reason for r in self.rejects if r.transient).items()))
        # Steps overlap: each one's span from first to last batch, beside its summed busy time.
        manifest["wall"] = {n: round(stats.counts.get(n, StepCounts()).wall, 3) for n in names}
        own = resource.getrusage(resource.RUSAGE_SELF)
        manifest["cpu"] = {**self.cpu, "driver": round(own.ru_utime + own.ru_stime, 2)}
        for name in names:  # each step's figures under its key (StepSpec.summary_key)
            if stats.summaries.get(name):
                manifest.setdefault(summary_key(name), {}).update(stats.summaries[name])
        manifest["llm_usage"] = llm_usage(self.config.budget_usd, stats.summaries)
        if stop:
            manifest["stopped"] = stop
        if errors.per_step:
            manifest["item_errors"] = dict(sorted(errors.per_step.items()))  # internal_error rejects per step
        if self.store is not None and self.store.damaged:
            manifest["checkpoints_damaged"] = len(self.store.damaged)  # found, named in run.log, recomputed
        validate("manifest", manifest)
        return manifest

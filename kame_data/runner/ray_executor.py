"""The Ray Data executor: the same steps and `apply_step` as the local executor, one
`map_batches` per step, each step in actors that load their models once.

Checkpoints and the LLM cache are the local executor's; on a cluster they live on storage every
node sees (`--checkpoints`, `--llm-cache`: a shared path or an object-store URL), so a node that dies
loses only its batches in flight, which Ray retries on another node and which read back whatever
the dead node had finished. Worker nodes get this package's code and the run's environment through
Ray's `runtime_env`. Counts and step summaries (LLM usage) travel back through a small collector
actor pinned to the driver's node, so the manifest says the same as a local run's; the run's LLM
meter lives in an actor of its own, so every step actor draws on one budget.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any, Iterator

from kame_data.codec import decode, encode
from kame_data.llm.accounting import BudgetExceeded
from kame_data.runner.checkpoint import CheckpointStore, Keyed
from kame_data.runner.config import RunConfig
from kame_data.runner.executor import (
    BatchDone,
    RunStats,
    StepCounts,
    apply_step,
    step_key,
)
from kame_data.step import RunContext, Step

log = logging.getLogger(__name__)

# Variables the workers inherit from the driver: kame-data's own, the thread pins, the hub caches.
PASSED_ENV = ("KAME_DATA_", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "HF_", "OPENAI_")


class _Collector:
    """Counts per step and the latest summary of each actor, drained by the driver."""

    def __init__(self):
        self.fresh: list[tuple[str, dict]] = []
        self.summaries: dict[tuple[str, str], dict] = {}
        self.error: BaseException | None = None
        self.seen: set[tuple[str, str]] = set()  # (step, first key) of batches already counted

    def fail(self, error: BaseException) -> None:
        """The first step error, kept whole: Ray's own wrappers lose the exception's type."""
        self.error = self.error or error

    def first_error(self) -> BaseException | None:
        return self.error

    def record(self, name: str, counts: dict, actor: str, summary: dict, batch: str = "") -> None:
        """A batch that Ray ran again (its node died) counts its inputs and outputs once; the work
        it redid still counts in `computed` and `seconds`."""
        if batch and (name, batch) in self.seen:
            counts = {**counts, "inputs": 0, "outputs": 0}
        self.seen.add((name, batch))
        self.fresh.append((name, counts))
        self.summaries[(name, actor)] = summary

    def drain(self) -> list[tuple[str, dict]]:
        out, self.fresh = self.fresh, []
        return out

    def all_summaries(self) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for (name, _), summary in sorted(self.summaries.items()):
            out.setdefault(name, []).append(summary)
        return out


class _RemoteMeter:
    """The run's Meter, held by a Ray actor, as the accounts of a step actor see it."""

    def __init__(self, handle, budget_usd: float | None):
        self.handle, self.budget_usd = handle, budget_usd

    def reserve(self, nano: int) -> str:
        import ray

        return ray.get(self.handle.reserve.remote(nano))

    def settle(self, reserved: int, spent: int) -> None:
        self.handle.settle.remote(reserved, spent)  # in order after this actor's reserves; no wait

    def reason(self) -> str:
        import ray

        return ray.get(self.handle.reason.remote())


class _StepActor:
    """Builds one step from what the driver gave it (its class, config and seed; models load in
    the actor, once) and applies it to batches of encoded records (kame_data/codec.py: nothing
    that travels between nodes can run code)."""

    def __init__(self, step_class: type[Step], step_config: Any, seed: int, budget_usd: float | None,
                 store_root: str | None, cache_path: str | None, collector, meter):
        import uuid

        from kame_data.llm.cache import open_cache

        cache = open_cache(cache_path) if cache_path else None
        self.step = step_class(step_config, RunContext(seed=seed, cache=cache, meter=_RemoteMeter(meter, budget_usd)))
        self.key = step_key(self.step)
        self.store = CheckpointStore(store_root) if store_root else None
        self.collector, self.id = collector, uuid.uuid4().hex

    def __call__(self, batch):
        import pyarrow as pa

        keyed = [Keyed(k, decode(b)) for k, b in zip(batch.column("key").to_pylist(),
                                                            batch.column("blob").to_pylist())]
        try:
            out, counts = apply_step(self.step, self.key, keyed, self.store)
        except Exception as e:
            import ray

            ray.get([self.collector.fail.remote(e),  # what the failed batch spent counts too
                     self.collector.record.remote(self.step.name, asdict(StepCounts()), self.id, self.step.summary())])
            if not isinstance(e, BudgetExceeded):
                raise
            # Ray Data would abort the dataset and drop finished blocks the driver has not read
            # yet: the batch yields nothing instead, and the driver stops when it reads the error.
            out, counts = [], StepCounts()
        self.collector.record.remote(self.step.name, asdict(counts), self.id, self.step.summary(),
                                     keyed[0].key if keyed else "")
        return pa.table({"key": pa.array([k.key for k in out], pa.string()),
                         "blob": pa.array([encode(k.record) for k in out],
                                          pa.large_binary())})


def _merge(summaries: list[dict]) -> dict:
    """Several actors' summaries of one step: numbers add up, the rest is taken from the first."""
    out: dict[str, Any] = {}
    for s in summaries:
        for k, v in s.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k in out:
                out[k] += v
            else:
                out.setdefault(k, v)
    return out


class RayExecutor:
    name = "ray"

    @staticmethod
    def _raise_budget(collector) -> None:
        """After the batches in order before it, a budget stop ends the run as it does locally."""
        import ray

        error = ray.get(collector.first_error.remote())
        if isinstance(error, BudgetExceeded):
            raise error

    def __init__(self, config: RunConfig, address: str | None = None, cache_path: str | Path | None = None,
                 runtime_env: dict | None = None, actors: int = 1):
        self.config, self.address, self.cache_path = config, address, cache_path
        self.user_env = runtime_env or {}
        self.actors = max(1, actors)  # per step; Ray Data spreads them over the nodes

    def runtime_env(self) -> dict:
        """Every Ray worker, on any node, runs this driver's kame_data code (shipped as a py_module)
        with the run's environment variables; a user's runtime_env (pip, container, more
        variables) is merged on top."""
        import kame_data

        env = {"py_modules": [str(Path(kame_data.__file__).resolve().parent)],
               "env_vars": {k: v for k, v in os.environ.items() if k.startswith(PASSED_ENV)}}
        user = dict(self.user_env)
        env["env_vars"].update(user.pop("env_vars", {}) or {})
        env["py_modules"] += list(user.pop("py_modules", []) or [])
        return {**env, **user}

    @staticmethod
    def _cpus(step: Step) -> float:
        """CPUs each step's actor reserves: a local cluster of two cores must hold all of them at
        once (the speak actor still runs its own worker pool, as locally, so renders match)."""
        return min(step.resources.cpus, 1.0 if step.resources.concurrent_batches > 1 else 0.5)

    def run(self, steps: list[Step], batches: Iterator[list[Keyed]], store: CheckpointStore | None,
            stats: RunStats, on_batch: BatchDone) -> Iterator[list[Keyed]]:
        try:
            import pyarrow as pa
            import ray
        except ImportError as e:
            raise RuntimeError("--executor ray needs `pip install 'ray[data]'`") from e

        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if not ray.is_initialized():
            # Without --ray-address, a cluster of our own ("local"), never one that happens to run here.
            ray.init(address=self.address or "local", include_dashboard=False, log_to_driver=False,
                     ignore_reinit_error=True, runtime_env=self.runtime_env(),
                     **({} if self.address else {"num_cpus": 2}))
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True  # rows come out as the local executor writes them
        from kame_data.llm.accounting import Meter

        # On the driver's node: the counts must outlive any worker node.
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        collector = ray.remote(_Collector).options(num_cpus=0, scheduling_strategy=here).remote()
        meter = ray.remote(Meter).options(num_cpus=0, scheduling_strategy=here).remote(self.config.budget_usd)
        # One block per batch: blocks flow through the steps independently, so a batch that
        # finished is written even when a later one fails (budget) and memory stays per batch.
        ds = ray.data.from_arrow([pa.table({
            "key": pa.array([k.key for k in batch], pa.string()),
            "blob": pa.array([encode(k.record) for k in batch], pa.large_binary()),
        }) for batch in batches])
        for step in steps:
            ds = ds.map_batches(
                _StepActor, batch_format="pyarrow", batch_size=self.config.batch_size, concurrency=self.actors,
                num_cpus=self._cpus(step), fn_constructor_kwargs=dict(
                    step_class=type(step), step_config=step.config, seed=step.seed, budget_usd=self.config.budget_usd,
                    store_root=store.root if store else None,
                    cache_path=str(self.cache_path) if self.cache_path else None, collector=collector, meter=meter))

        def report() -> None:
            for name, counts in ray.get(collector.drain.remote()):
                c = StepCounts(**counts)
                stats.record(name, c)
                on_batch(name, c)

        try:
            for batch in ds.iter_batches(batch_format="pyarrow", batch_size=self.config.batch_size):
                yield [Keyed(k, decode(b)) for k, b in zip(batch.column("key").to_pylist(),
                                                                 batch.column("blob").to_pylist())]
                report()
                self._raise_budget(collector)
            self._raise_budget(collector)
        except Exception as e:  # noqa: BLE001 - re-raised as the step's own error when there is one
            own = ray.get(collector.first_error.remote())
            if own is None or own is e:
                raise
            raise own from e
        finally:
            report()
            for name, summaries in ray.get(collector.all_summaries.remote()).items():
                stats.summaries[name] = _merge(summaries)

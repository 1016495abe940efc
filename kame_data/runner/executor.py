"""What every executor shares: applying one step to a batch of keyed records with checkpoints,
and the per-step counts that go into progress.json and the manifest.

The local and the Ray executor both call `apply_step`, so they produce the same rows from the same
step functions; they differ only in where and how concurrently batches run.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Protocol

from kame_data.costs import piece
from kame_data.errors import RunAbort, internal_error
from kame_data.records import Reject
from kame_data.runner.checkpoint import CheckpointStore, Keyed, config_key, digest
from kame_data.scrub import scrub
from kame_data.step import Step
from kame_data.workers import EngineCrashed

log = logging.getLogger(__name__)


def step_key(step: Step) -> str:
    """A step's identity for checkpoints: its name, config and seed."""
    return config_key(step.name, step.identity())


@dataclass
class StepCounts:
    inputs: int = 0  # records handed to the step (rejects pass through uncounted)
    outputs: int = 0  # records it produced (not rejects)
    computed: int = 0  # inputs it computed rather than read from a checkpoint
    retried: int = 0  # of those, inputs whose earlier result was transient (tried again)
    transient: int = 0  # inputs whose result is transient this time (not checkpointed; a rerun retries)
    seconds: float = 0.0  # time spent in the step (batches running at once each count)
    # CPU time of the driver threads that ran its batches: the step's own cost where it computes in
    # the driver (template scripts), where batch time would also count waits for a busy core
    cpu: float = 0.0
    started: float = 0.0  # wall clock (epoch s) when its first batch began, and when its last ended
    ended: float = 0.0

    def add(self, other: "StepCounts") -> None:
        self.inputs += other.inputs
        self.outputs += other.outputs
        self.computed += other.computed
        self.retried += other.retried
        self.transient += other.transient
        self.seconds += other.seconds
        self.cpu += other.cpu
        self.started = min(self.started or other.started, other.started or self.started)
        self.ended = max(self.ended, other.ended)

    @property
    def wall(self) -> float:
        """Seconds from the step's first batch to its last: its share of the run's wall time."""
        return max(0.0, self.ended - self.started)


@dataclass
class RunStats:
    """Counts per step and each step's summary (LLM usage …), filled in as batches finish."""

    counts: dict[str, StepCounts] = field(default_factory=dict)
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, name: str, counts: StepCounts) -> None:
        with self._lock:
            self.counts.setdefault(name, StepCounts()).add(counts)


_SETUP = threading.Lock()


def _live(batch: Iterable[Keyed]) -> int:
    return sum(1 for k in batch if not isinstance(k.record, Reject))


def is_final(group: list[Any]) -> bool:
    """A group holding a transient reject is not final: it is not checkpointed as a result."""
    return not any(isinstance(r, Reject) and r.transient for r in group)


def apply_step(step: Step, key: str, keyed: list[Keyed],
               store: CheckpointStore | None) -> tuple[list[Keyed], StepCounts]:
    """Run `step` on the non-reject records of `keyed` (rejects pass through).

    Returns the outputs in input order, each keyed by (step identity, input key, position), and the
    counts. Checkpointed inputs are read back; the step's `setup` runs only when something is left
    to compute (a resumed run may need no model at all). Only final groups are stored as results;
    a transient one leaves a marker, so the rerun that computes it again counts it as retried."""
    started, wall_start, cpu_start = time.perf_counter(), time.time(), time.thread_time()
    use_store = store if step.resources.checkpoint else None
    results: dict[str, list[Any]] = {}
    misses: list[Keyed] = []
    retried = transient = 0
    for k in keyed:
        if isinstance(k.record, Reject):
            continue
        with piece("checkpoint.read"):
            found = use_store.get(step.name, digest(key, k.key)) if use_store is not None else None
        if found is None:
            misses.append(k)
            retried += use_store is not None and use_store.was_transient(step.name, digest(key, k.key))
        else:
            results[k.key] = found
    if misses:
        with _SETUP:  # several batches of one step may arrive at once; models load once
            step.setup()
        groups = run_isolated(step, misses)
        if len(groups) != len(misses):
            raise RuntimeError(f"step {step.name}: run returned {len(groups)} groups for {len(misses)} inputs")
        for k, group in zip(misses, groups):
            final = is_final(group)
            transient += not final
            if use_store is not None:
                item = digest(key, k.key)
                if final:
                    with piece("checkpoint.write"):
                        use_store.put(step.name, item, group)
                    use_store.clear_transient(step.name, item)
                else:
                    use_store.mark_transient(step.name, item)
            results[k.key] = group
    out: list[Keyed] = []
    for k in keyed:
        if isinstance(k.record, Reject):
            out.append(k)
            continue
        for j, rec in enumerate(results[k.key]):
            out.append(Keyed(digest(key, k.key, str(j)), rec))
    return out, StepCounts(inputs=_live(keyed), outputs=_live(out), computed=len(misses), retried=retried,
                           transient=transient, seconds=time.perf_counter() - started, started=wall_start, ended=time.time(),
                           cpu=time.thread_time() - cpu_start)


def _item_id(record: Any) -> str:
    return str(getattr(record, "id", "?"))


def run_isolated(step: Step, keyed: list[Keyed]) -> list[list[Any]]:
    """`step.run` over the records of `keyed`, one group per input. An exception that is not a
    RunAbort (a bug, or an input no one foresaw) must cost only the input that caused it: the
    batch is run again one input at a time and each input that raises becomes an internal_error
    reject. A RunAbort (budget, service down, engine crash) ends the run as before."""
    records = [k.record for k in keyed]
    try:
        return step.run(records)
    except EngineCrashed as e:
        raise (e if e.items else e.on_items([_item_id(r) for r in records])) from None
    except RunAbort:
        raise
    except Exception as e:  # noqa: BLE001 - isolated below
        if len(records) == 1:
            return [[internal_error(step.name, _item_id(records[0]), e, log)]]
        log.info("step %s raised on a batch of %d (%s: %s); running its inputs one at a time", step.name,
                 len(records), type(e).__name__, scrub(str(e))[:200])
    groups: list[list[Any]] = []
    for k in keyed:
        groups.extend(run_isolated(step, [k]))
    return groups


BatchDone = Callable[[str, StepCounts], None]


class Executor(Protocol):
    """Runs steps over batches; yields the last step's batches in input order."""

    name: str

    def run(self, steps: list[Step], batches: Iterator[list[Keyed]], store: CheckpointStore | None,
            stats: RunStats, on_batch: BatchDone) -> Iterator[list[Keyed]]: ...

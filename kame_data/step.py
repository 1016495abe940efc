"""The step contract: what every stage of a pipeline is, as the runner and its executors see it.

A step is a pure function over batches of typed records with a typed config: `run(batch)` returns
one group of outputs per input, in input order (a group may hold `Reject`s). Everything else —
checkpoints, resume, parallelism, progress, manifests — belongs to the runner and its executors,
which read what a step needs from `resources` instead of probing it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any, Callable, ClassVar, Generic, TypeVar

OPERATIONAL = "operational"


def operational(default: Any = MISSING, *, default_factory: Any = MISSING) -> Any:
    """A config field that decides how a step runs, never what it outputs (workers, timeouts,
    retries, budgets, concurrency): changing it must not recompute or re-pay anything, so it is
    left out of the step's identity (the checkpoint key)."""
    return field(default=default, default_factory=default_factory, metadata={OPERATIONAL: True})


def identity_of(value: Any) -> Any:
    """`value` as JSON-able data without its operational fields (recursively through nested
    config dataclasses, lists and mappings)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: identity_of(getattr(value, f.name)) for f in fields(value)
                if not f.metadata.get(OPERATIONAL)}
    if isinstance(value, dict):
        return {k: identity_of(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [identity_of(v) for v in value]
    return value


In = TypeVar("In")
Out = TypeVar("Out")


@dataclass(frozen=True)
class Resources:
    """What a step asks of an executor.

    `cpus`: cores one running batch keeps busy (an executor reserves them; Ray places actors by it).
    `concurrent_batches`: how many batches may be in the step at once: more than one where the step
    itself absorbs them (a worker pool that renders dialogues in parallel, a remote LLM whose
    requests from several batches share one bounded in-flight window); one where order matters.
    `checkpoint`: whether each input's outputs are checkpointed (cheap, stateful steps say no).
    `processes`: the step is pure and CPU-bound and its records pickle, so the local executor may run
    it in worker processes, one per core (runner/pooled.py); its outputs do not depend on how many.
    """

    cpus: float = 0.1
    concurrent_batches: int = 1
    checkpoint: bool = True
    processes: bool = False


@dataclass(frozen=True)
class RunContext:
    """What every step of one run shares, handed to each step when it is built: the recipe seed,
    the LLM answer cache (None: no cache) and the run's LLM meter (one budget for every LLM call
    of the run; None: an unbounded meter of the step's own)."""

    seed: int = 0
    cache: Any = None
    meter: Any = None


class Step(ABC, Generic[In, Out]):
    """One stage: a name, a config dataclass, and `run` over a batch.

    Subclasses set `name` and build from (config, context). Executors, never the step itself, call
    `setup` (load models; only when some input is not already checkpointed), then `run` on batches,
    and `teardown` (always, also after an error). `run` is the one way in: one group of outputs per
    input, in input order, a pure function of the batch, the config and the context's seed."""

    name: ClassVar[str]

    def __init__(self, config: Any, context: RunContext | None = None):
        self.config = config
        self.context = context or RunContext()
        self.seed = self.context.seed

    @property
    def resources(self) -> Resources:
        return Resources()

    def setup(self) -> None:
        """Load models and open services; idempotent."""

    def teardown(self) -> None:
        """Release what `setup` took; idempotent."""

    @abstractmethod
    def run(self, batch: list[In]) -> list[list[Out]]:
        """One list of outputs (records or Rejects) per input, in input order."""

    def identity(self) -> dict[str, Any]:
        """What determines this step's outputs besides its input: the checkpoint key material
        (operational config fields left out)."""
        return {"config": identity_of(self.config), "seed": self.seed}

    def summary(self) -> dict[str, Any]:
        """Figures for the manifest (e.g. LLM calls, tokens, cost); empty by default."""
        return {}

    def worker_cpu_seconds(self) -> float | None:
        """CPU seconds its own worker processes have used (the manifest's `cpu`, what `plan`
        predicts as the step's work); None for a step that computes in the run's process."""
        return None


@dataclass(frozen=True)
class StepSpec:
    """Everything the runner, the executors, the manifest, `--until`, `plan`, `doctor` and the
    recipe schema need to know about a step, declared beside the step itself (its module's `SPEC`)
    and collected by kame_data/pipeline.py.

    `order`: its place in the pipeline (ascending). The recipe section named after the step holds
    its `config`. `output`: the file `--until NAME` writes its records to. `summary_key`: where
    its summary goes in the manifest (default: its name). `budget`: for a step that spends on the
    run's LLM meter, how to read the run's budget from its config. `doctor`: what `kame-data
    doctor --recipe` should check for a config of this step (options such as the voice per engine
    or the simulator model). `cost`: the core-seconds per second of audio of each part a config
    of this step switches on, as estimates (`plan` uses the calibration's measured rate of a part,
    `calibration.json` `steps`, where it has one; a part named after its step is a stage of its own,
    others add to their step's stage).
    `about`: one line for `kame-data steps` and `plan`."""

    step: type[Step]
    config: type
    order: int
    output: str
    about: str
    summary_key: str | None = None
    budget: Callable[[Any], float | None] | None = None
    doctor: Callable[[Any], dict[str, Any]] | None = None
    cost: Callable[[Any], dict[str, float]] | None = None

    @property
    def name(self) -> str:
        return self.step.name

    @property
    def manifest_key(self) -> str:
        return self.summary_key or self.name

    def build(self, config: Any, context: RunContext) -> Step:
        return self.step(config, context)

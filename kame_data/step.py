"""The step contract: what every stage of a pipeline is, as the runner and its executors see it.

A step is a pure function over batches of typed records with a typed config: `run(batch)` returns
one group of outputs per input, in input order (a group may hold `Reject`s). Everything else —
checkpoints, resume, parallelism, progress, manifests — belongs to the runner and its executors,
which read what a step needs from `resources` instead of probing it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, Generic, TypeVar

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
    """

    cpus: float = 0.1
    concurrent_batches: int = 1
    checkpoint: bool = True


class Step(ABC, Generic[In, Out]):
    """One stage. Subclasses set `name`, take their config dataclass and the recipe seed, load
    models in `setup` (called only when some input is not already checkpointed) and release them
    in `teardown` (always called, also after an error)."""

    name: ClassVar[str]

    def __init__(self, config: Any, seed: int = 0):
        self.config = config
        self.seed = seed

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

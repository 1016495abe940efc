"""The step registry: which steps a run has, in which order, and what each one needs.

Each step module declares a `SPEC` (kame_data/step.py `StepSpec`) beside its class; this module
collects them. Everything that used to know the steps by name — the executors, the manifest,
`--until`, `plan`, `doctor`, the recipe schema — asks here instead, so adding a step is one file
plus one line below (or `register` at run time, for a plugin or a test).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from kame_data.oracle.stage import SPEC as ORACLE
from kame_data.script.stage import SPEC as SCRIPT
from kame_data.speech.post import ACOUSTICS_SPEC as ACOUSTICS
from kame_data.speech.post import QUALITY_SPEC as QUALITY
from kame_data.speech.stage import SPEC as SPEAK
from kame_data.step import StepSpec

_BUILTIN: tuple[StepSpec, ...] = (SCRIPT, SPEAK, QUALITY, ACOUSTICS, ORACLE)
_extra: list[StepSpec] = []
_lock = threading.Lock()


class UnknownStep(KeyError):
    """A step name no registered spec has; the message lists those that exist."""

    def __str__(self) -> str:
        return str(self.args[0])


def steps() -> list[StepSpec]:
    """Every registered step between the sources and the writer, in pipeline order."""
    with _lock:
        specs = list(_BUILTIN) + list(_extra)
    return sorted(specs, key=lambda s: s.order)


def built_in() -> tuple[StepSpec, ...]:
    """kame-data's own steps, in pipeline order (what schemas/recipe.schema.json describes)."""
    return tuple(sorted(_BUILTIN, key=lambda s: s.order))


def names() -> list[str]:
    return [s.name for s in steps()]


def spec(name: str) -> StepSpec:
    for s in steps():
        if s.name == name:
            return s
    raise UnknownStep(f"no step {name!r} (steps: {', '.join(names())})")


def register(step_spec: StepSpec) -> None:
    """Add a step to every run from now on (a plugin's step; tests use `registered`)."""
    with _lock:
        if any(s.name == step_spec.name for s in (*_BUILTIN, *_extra)):
            raise ValueError(f"a step named {step_spec.name!r} is already registered")
        if any(s.order == step_spec.order for s in (*_BUILTIN, *_extra)):
            raise ValueError(f"step {step_spec.name!r}: order {step_spec.order} is taken")
        _extra.append(step_spec)


def unregister(name: str) -> None:
    with _lock:
        _extra[:] = [s for s in _extra if s.name != name]


@contextmanager
def registered(step_spec: StepSpec) -> Iterator[StepSpec]:
    """`step_spec` registered for the duration of a `with` block."""
    register(step_spec)
    try:
        yield step_spec
    finally:
        unregister(step_spec.name)

"""Running one step the way an executor does, for tests that call a step directly."""

from __future__ import annotations

from typing import Any

from kame_data.step import Step


def run_flat(step: Step, batch: list[Any]) -> list[Any]:
    """`setup`, then `run` over `batch`: every output of every input, in order."""
    step.setup()
    return [out for group in step.run(batch) for out in group]

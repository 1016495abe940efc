"""A step that is not part of kame-data, added through the registry alone (this file plus one
`pipeline.register` / `pipeline.registered` call): it tags each dialogue's category, so a test can
see in the published rows that it ran."""

from __future__ import annotations

from dataclasses import dataclass, replace

from kame_data.records import RenderedDialogue
from kame_data.step import Resources, RunContext, Step, StepSpec


@dataclass(frozen=True)
class ToyConfig:
    tag: str = "toy"  # appended to every dialogue's category
    min_words: int = 1  # dialogues with fewer words pass untouched


class ToyStep(Step[RenderedDialogue, RenderedDialogue]):
    name = "toy"

    def __init__(self, config: ToyConfig, context: RunContext | None = None):
        super().__init__(config, context)
        self.seen = 0
        self.ready = False

    @property
    def resources(self) -> Resources:
        return Resources(cpus=0.1)

    def setup(self) -> None:
        self.ready = True

    def run(self, batch: list[RenderedDialogue]) -> list[list[RenderedDialogue]]:
        assert self.ready, "executors call setup() before run()"
        self.seen += len(batch)
        return [[replace(r, dialogue=replace(r.dialogue, category=f"{r.dialogue.category}+{self.config.tag}"))
                 if len(r.words) >= self.config.min_words else r] for r in batch]

    def summary(self) -> dict:
        return {"seen": self.seen}


SPEC = StepSpec(ToyStep, ToyConfig, order=45, output="toyed.jsonl", about="a test's own step: tags each dialogue",
                cost=lambda cfg: {ToyStep.name: 0.5})

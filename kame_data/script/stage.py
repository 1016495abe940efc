"""The script stage as the runner sees it."""

from __future__ import annotations

from kame_data.records import Dialogue, Reject, SourceItem
from kame_data.script.template import ScriptConfig, script_batch


class ScriptStage:
    name = "script"

    def __init__(self, cfg: ScriptConfig, seed: int = 0):
        self.cfg, self.seed = cfg, seed

    def open(self) -> None:
        pass

    def process(self, batch: list[SourceItem]) -> list[Dialogue | Reject]:
        return script_batch(batch, self.cfg, self.seed)

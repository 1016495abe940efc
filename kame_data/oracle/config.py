"""The oracle step's config (the recipe's `oracle:` section)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kame_data.llm.config import BackendConfig
from kame_data.records import CONTINUATION_GAP
from kame_data.step import operational


@dataclass(frozen=True)
class OracleConfig:
    interval: float = 0.5
    target: str = "assistant"
    retries: int = 2  # extra attempts (new seed) for a prediction that is not a reply (replies.KINDS)
    trigger: str = "every_step"  # every_step | new_words (skip steps where no word arrived since the last event)
    level5: str = "hint"  # hint (prediction = true reply, no call) | call (ask the simulator anyway)
    # A level-5 event inside a turn of the speaker being heard hands over the true reply before that
    # speaker has finished: reject the dialogue (default), or keep it (recipes with long pauses).
    early_truth: str = "reject"  # reject | keep
    budget_usd: float | None = operational(None)  # the run's LLM budget: every LLM call of the run draws on it (script rewrites too)
    backend: BackendConfig = field(default_factory=BackendConfig)

    def __post_init__(self) -> None:
        if self.early_truth not in ("reject", "keep"):
            raise ValueError(f"oracle.early_truth must be reject or keep, not {self.early_truth!r}")

    @property
    def run_gap(self) -> float:
        """The ladder's run rule (docs/design.md): a word ending this long after the previous one ends a
        speaker's run. The speak step keeps every pause inside a turn below it."""
        return CONTINUATION_GAP

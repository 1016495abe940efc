"""The oracle step's config (the recipe's `oracle:` section)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from kame_data.config_schema import Schema
from kame_data.llm.config import BackendConfig
from kame_data.oracle.latency import LatencyModel, parse_latency
from kame_data.records import CONTINUATION_GAP
from kame_data.step import operational


@dataclass(frozen=True)
class OracleConfig:
    """Simulated oracle ladders (docs/design.md, "Oracle events"): a prediction every `interval`
    seconds from the simulator LLM."""

    interval: Annotated[float, Schema(exclusiveMinimum=0)] = 0.5  # seconds between two oracle events (the step Δ)
    target: Literal["assistant", "user", "both"] = "assistant"  # the speaker whose next turn is predicted (both: either); other events are skipped
    retries: Annotated[int, Schema(minimum=0)] = 2  # extra attempts (new seed) for a prediction that is not a reply (replies.KINDS) or ignores the clue
    # Another draw of every prediction (the same ladders and prompts, other samples): attempt k of a step
    # is sampled with seed 1000 * seed + k. For comparing prompts or models over several draws.
    seed: Annotated[int, Schema(minimum=0)] = 0
    trigger: Literal["every_step", "new_words"] = "every_step"  # new_words: skip steps where no word arrived since the last event
    level5: Literal["hint", "call"] = "hint"  # hint: the prediction is the true reply, no call; call: ask the simulator anyway
    # A level-5 event (the true reply) inside a turn of the speaker being heard hands the reply over
    # before that speaker has finished: reject the dialogue (default), or keep it (recipes with long pauses).
    early_truth: Literal["reject", "keep"] = "reject"
    # The run's LLM budget in US dollars: every LLM call of the run draws on it (script rewrites too).
    budget_usd: Annotated[float, Schema(exclusiveMinimum=0)] | None = operational(None)
    backend: BackendConfig = field(default_factory=BackendConfig)  # the simulator LLM
    # When each event's words would reach a KAME front-end (docs/concepts/oracle-arrival.md): a preset (ideal,
    # hosted-fast, hosted-slow, stress) or a mapping of its parameters, e.g. {preset: hosted-fast, first_token: 1.0}.
    # ideal: every event arrives whole at its ladder time, and rows carry no arrival column. The write step
    # applies it to finished ladders, so changing it re-publishes without a single LLM call.
    latency: str | dict[str, Any] = operational("ideal")

    def __post_init__(self) -> None:
        parse_latency(self.latency)  # raises ValueError naming the key
        if self.early_truth not in ("reject", "keep"):
            raise ValueError(f"oracle.early_truth must be reject or keep, not {self.early_truth!r}")

    @property
    def run_gap(self) -> float:
        """The ladder's run rule (docs/design.md): a word ending this long after the previous one ends a
        speaker's run. The speak step keeps every pause inside a turn below it."""
        return CONTINUATION_GAP

    @property
    def latency_model(self) -> LatencyModel:
        """The parsed `latency` (what the write step applies)."""
        return parse_latency(self.latency)

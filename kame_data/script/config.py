"""The script step's config (the recipe's `script:` section)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from kame_data.config_schema import Schema
from kame_data.llm.config import BackendConfig

EMBEDDED = "llamacpp"  # the embedded rewrite model (style auto does not pay for its rewrites)

Words = Annotated[int, Schema(minimum=5)]
Positive = Annotated[float, Schema(exclusiveMinimum=0)]


@dataclass(frozen=True)
class LlmScriptConfig:
    """`script.llm`: the rewrite model (same backends and cache as the oracle) and its limits."""

    backend: BackendConfig = field(default_factory=BackendConfig)  # the rewrite model
    max_tokens: Annotated[int, Schema(minimum=32)] = 400  # per request; the backend's own max_tokens is the oracle's, not ours
    temperature: Annotated[float, Schema(minimum=0)] = 0.8  # sampling temperature of the rewrites
    retries: Annotated[int, Schema(minimum=0)] = 1  # further attempts (new seed) before falling back to the template
    max_user_words: Words = 90  # the words a rewritten user turn may have (asked for, and checked with 25% slack)
    max_assistant_words: Words = 80  # likewise for an assistant turn


@dataclass(frozen=True)
class ScriptConfig:
    """Spoken-style dialogues from source items: the user asks, the assistant answers."""

    # template, or llm: an LLM rewrites each template dialogue (the template on failure); auto: llm when
    # script.llm.backend is a served model, template with the embedded one, whose rewrites fail the checks
    # and fall back to the template (kame_data/calibration.json, llamacpp.script.fallback_rate).
    style: Literal["template", "llm", "auto"] = "template"
    # How a multiple-choice question is read: all options, subset (the answer and some distractors,
    # `max_options` in all) or open (no options read).
    mmlu_options: Literal["all", "subset", "open"] = "subset"
    max_options: Annotated[int, Schema(minimum=2, maximum=10)] = 4  # options read with `subset`
    variants: Annotated[int, Schema(minimum=1)] = 1  # dialogues per item, unless the source's sampling set `item.variants`
    max_explanation_words: Words = 40  # the reason the assistant gives is clipped to about this many words
    followup_rate: Annotated[float, Schema(minimum=0, maximum=1)] = 0.0  # share of dialogues whose reason comes as a follow-up ("Why is that?")
    # Every turn fits this many seconds (estimated from its words at `words_per_second`): fewer options
    # are read, else the dialogue is refused too_long.
    max_turn_seconds: Positive = 45.0
    words_per_second: Positive = 2.6  # speaking rate the turn length is estimated at
    llm: LlmScriptConfig = field(default_factory=LlmScriptConfig)  # style llm: the rewrite model and its limits

    def __post_init__(self) -> None:
        if self.style == "auto":  # decided once, so the steps, checkpoints and plan see template or llm
            object.__setattr__(self, "style", "template" if self.llm.backend.kind == EMBEDDED else "llm")

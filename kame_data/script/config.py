"""The script step's config (the recipe's `script:` section)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kame_data.llm.config import BackendConfig


@dataclass(frozen=True)
class LlmScriptConfig:
    """`script.llm`: the rewrite model (same backends and cache as the oracle) and its limits."""

    backend: BackendConfig = field(default_factory=BackendConfig)
    max_tokens: int = 400  # per request; the backend's own max_tokens is the oracle's, not ours
    temperature: float = 0.8
    retries: int = 1  # further attempts (new seed) before falling back to the template
    max_user_words: int = 90
    max_assistant_words: int = 80


@dataclass(frozen=True)
class ScriptConfig:
    style: str = "template"  # template | llm (an LLM rewrites each template dialogue; template on failure)
    mmlu_options: str = "subset"  # all | subset (answer + distractors) | open (no options read)
    max_options: int = 4
    variants: int = 1  # dialogues per item, unless the source's sampling set `item.variants`
    max_explanation_words: int = 40
    followup_rate: float = 0.0  # share of dialogues whose reason comes as a follow-up ("Why is that?")
    max_turn_seconds: float = 45.0  # every turn, estimated from its words at `words_per_second`
    words_per_second: float = 2.6
    llm: LlmScriptConfig = field(default_factory=LlmScriptConfig)

"""A recipe resolved once into typed configs, one per step, with every default filled in.

The manifest stores this resolved form (`to_dict`), so a dataset says exactly how it was made
even after defaults change; `plan` and the card read the same values the run used.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any

from kame_data.oracle.stage import OracleConfig
from kame_data.recipe import Recipe, RecipeError, build_config, config_hash
from kame_data.script.template import ScriptConfig
from kame_data.sources.filters import FilterConfig
from kame_data.speech.acoustics import AcousticsConfig
from kame_data.speech.config import SpeakConfig
from kame_data.speech.quality import QualityConfig


@dataclass(frozen=True)
class PublishConfig:
    """The recipe's `publish:` section: how rows become shards and splits."""

    rows_per_shard: int | None = None  # None with no shard_size_mb either: the writer's default
    shard_size_mb: float | None = None
    row_group_size: int = 8
    split: str | None = None  # one split (default "train") …
    splits: dict[str, float] | None = None  # … or fractions by name, summing to 1 (checked by the writer)


@dataclass(frozen=True)
class RunConfig:
    recipe: Recipe
    filters: FilterConfig = field(default_factory=FilterConfig)
    script: ScriptConfig = field(default_factory=ScriptConfig)
    speak: SpeakConfig = field(default_factory=SpeakConfig)
    oracle: OracleConfig = field(default_factory=OracleConfig)
    publish: PublishConfig = field(default_factory=PublishConfig)
    quality: QualityConfig = field(default_factory=QualityConfig)
    acoustics: AcousticsConfig = field(default_factory=AcousticsConfig)

    SECTIONS = {"filters": FilterConfig, "script": ScriptConfig, "speak": SpeakConfig, "oracle": OracleConfig,
                "publish": PublishConfig, "quality": QualityConfig, "acoustics": AcousticsConfig}

    @classmethod
    def resolve(cls, recipe: Recipe) -> "RunConfig":
        """Every section built into its dataclass; a bad value names the recipe and the section."""
        built = {}
        for name, section_cls in cls.SECTIONS.items():
            try:
                built[name] = build_config(section_cls, recipe.raw.get(name) or {})
            except (TypeError, ValueError) as e:
                raise RecipeError(f"recipe {recipe.path.name}: {name}: {e}") from e
        if built["speak"].pauses.long_pauses and built["oracle"].early_truth == "reject":
            raise RecipeError(
                f"recipe {recipe.path.name}: speak.pauses keeps pauses of {built['oracle'].run_gap:g} s or more "
                "inside turns (bound: false or thinking > 0), where the oracle ladder ends the speaker's run: "
                "level 5, the true reply, comes before the turn is over. Set oracle.early_truth: keep to "
                "publish such dialogues (validate then counts their events instead of failing).")
        return cls(recipe=recipe, **built)

    @property
    def name(self) -> str:
        return self.recipe.name

    @property
    def seed(self) -> int:
        return self.recipe.seed

    @property
    def batch_size(self) -> int:
        return self.recipe.batch_size

    def to_dict(self) -> dict[str, Any]:
        """The resolved recipe: what was written plus every default, JSON-ready (unset options omitted)."""
        r = self.recipe
        out: dict[str, Any] = {"name": r.name, "description": r.description, "seed": r.seed,
                               "batch_size": r.batch_size,
                               **({"max_item_errors": r.max_item_errors} if r.max_item_errors is not None else {}),
                               "sources": [_plain(asdict(s)) for s in r.sources]}
        for name in self.SECTIONS:
            out[name] = _plain(asdict(getattr(self, name)))
        return out

    @property
    def config_hash(self) -> str:
        return config_hash(self.to_dict())

    def meter(self):
        """The run's one LLM meter: `oracle.budget_usd` bounds every LLM call of the run."""
        from kame_data.llm.accounting import Meter

        return Meter(self.oracle.budget_usd)

    def build_steps(self, cache=None, meter=None) -> list:
        """The processing steps between the sources and the writer, in order; every LLM step
        draws on `meter` (the run's; a new one when not given)."""
        from kame_data.oracle.stage import OracleStage
        from kame_data.script.stage import ScriptStage
        from kame_data.speech.post import AcousticsStage, QualityStage
        from kame_data.speech.stage import SpeakStage

        meter = meter if meter is not None else self.meter()
        return [ScriptStage(self.script, self.seed, cache=cache, meter=meter),
                SpeakStage(self.speak, self.seed, run_gap=self.oracle.run_gap),
                QualityStage(self.quality, self.seed), AcousticsStage(self.acoustics, self.seed),
                OracleStage(self.oracle, cache=cache, meter=meter)]


def _plain(value: Any) -> Any:
    """JSON form: tuples as lists, None (unset) dropped from mappings."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def dataclass_keys(cls: type) -> dict[str, Any]:
    """Field names of a config dataclass, nested ones expanded (for the schema sync test)."""
    out: dict[str, Any] = {}
    for f in fields(cls):
        proto = f.default_factory() if callable(f.default_factory) else f.default  # type: ignore[misc]
        out[f.name] = dataclass_keys(type(proto)) if is_dataclass(proto) else None
    return out

"""A recipe resolved once into typed configs, one per step, with every default filled in.

The manifest stores this resolved form (`to_dict`), so a dataset says exactly how it was made
even after defaults change; `plan` and the card read the same values the run used.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any

from kame_data import pipeline
from kame_data.dataset.config import PublishConfig
from kame_data.recipe import Recipe, RecipeError, build_config, config_hash
from kame_data.runner.recipe_schema import RUN_SECTIONS, recipe_schema
from kame_data.schema import SchemaError, validate
from kame_data.sources.config import FilterConfig
from kame_data.step import RunContext, Step, StepSpec


def sections() -> dict[str, type]:
    """Every recipe section with a config type: the run's own, then each registered step's (its name)."""
    return {**RUN_SECTIONS, **{spec.name: spec.config for spec in pipeline.steps()}}


@dataclass(frozen=True)
class RunConfig:
    """`filters` and `publish` for the run; `steps`: every registered step's config by its name,
    also reachable as an attribute (`config.speak`)."""

    recipe: Recipe
    filters: FilterConfig = field(default_factory=FilterConfig)
    publish: PublishConfig = field(default_factory=PublishConfig)
    steps: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        steps = self.__dict__.get("steps") or {}
        if name in steps:
            return steps[name]
        raise AttributeError(f"{type(self).__name__} has no section {name!r}")

    @classmethod
    def resolve(cls, recipe: Recipe) -> "RunConfig":
        """The one parse of a recipe's sections: the whole recipe checked against the schema of the
        steps registered now (a bad key or value named with its path), then every section built
        into its dataclass (a value its class refuses names the recipe and the section)."""
        try:
            validate(recipe_schema(), recipe.raw, what=f"recipe {recipe.path.name}")
        except SchemaError as e:
            raise RecipeError(str(e)) from e
        built = {}
        for name, section_cls in sections().items():
            try:
                built[name] = build_config(section_cls, recipe.raw.get(name) or {})
            except (TypeError, ValueError) as e:
                raise RecipeError(f"recipe {recipe.path.name}: {name}: {e}") from e
        config = cls(recipe=recipe, **{k: built.pop(k) for k in RUN_SECTIONS}, steps=built)
        config._check()
        return config

    def _check(self) -> None:
        """Settings of two steps that cannot go together."""
        if self.speak.pauses.long_pauses and self.oracle.early_truth == "reject":
            raise RecipeError(
                f"recipe {self.recipe.path.name}: speak.pauses keeps pauses of {self.oracle.run_gap:g} s or more "
                "inside turns (bound: false or thinking > 0), where the oracle ladder ends the speaker's run: "
                "level 5, the true reply, comes before the turn is over. Set oracle.early_truth: keep to "
                "publish such dialogues (validate then counts their events instead of failing).")

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
        for name in RUN_SECTIONS:
            out[name] = _plain(asdict(getattr(self, name)))
        for name, section in self.steps.items():
            out[name] = _plain(asdict(section))
        return out

    @property
    def config_hash(self) -> str:
        return config_hash(self.to_dict())

    @property
    def budget_usd(self) -> float | None:
        """The run's LLM budget, read from the step that declares it (`StepSpec.budget`)."""
        for spec in pipeline.steps():
            if spec.budget is not None and spec.name in self.steps:
                budget = spec.budget(self.steps[spec.name])
                if budget is not None:
                    return budget
        return None

    def meter(self):
        """The run's one LLM meter: its budget bounds every LLM call of the run."""
        from kame_data.llm.accounting import Meter

        return Meter(self.budget_usd)

    def backends(self) -> list[Any]:
        """Every simulator backend config of the run's steps (their API keys are secrets to scrub)."""
        from kame_data.llm.config import BackendConfig

        found: list[Any] = []

        def walk(value: Any) -> None:
            if isinstance(value, BackendConfig):
                found.append(value)
            elif is_dataclass(value):
                for f in fields(value):
                    walk(getattr(value, f.name))

        for section in self.steps.values():
            walk(section)
        return found

    def specs(self) -> list[tuple[StepSpec, Any]]:
        """Each registered step with its config, in pipeline order."""
        return [(spec, self.steps[spec.name]) for spec in pipeline.steps() if spec.name in self.steps]

    def build_steps(self, context: RunContext | None = None) -> list[Step]:
        """The processing steps between the sources and the writer, in order, sharing `context`
        (the run's seed, LLM cache and meter; a fresh meter when none is given)."""
        context = context or RunContext(seed=self.seed, meter=self.meter())
        return [spec.build(cfg, context) for spec, cfg in self.specs()]


def _plain(value: Any) -> Any:
    """JSON form: tuples as lists, None (unset) dropped from mappings."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value

"""The recipe resolved once: the schema is generated from the config dataclasses and the step
registry (the committed copy equals it), the manifest keeps the resolved form, and the resolved
form is itself a valid recipe that resolves to the same."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import yaml

from kame_data import pipeline
from kame_data.config_schema import undocumented
from kame_data.recipe import RecipeError, load_recipe
from kame_data.resources import schema
from kame_data.runner.config import RunConfig
from kame_data.runner.recipe_schema import built_in_schema, recipe_schema
from kame_data.schema import validate
from kame_data.step import Step, StepSpec
from tests.conftest import ROOT


def test_the_committed_schema_is_the_generated_one():
    committed = (ROOT / "schemas" / "recipe.schema.json").read_text("utf-8")
    assert committed == built_in_schema(), "schemas/recipe.schema.json is stale: run `make schema`"


def test_every_key_of_the_schema_is_described():
    assert undocumented(recipe_schema()) == []


@pytest.mark.parametrize("recipe", sorted(p.name for p in (ROOT / "recipes").glob("*.yaml") if "train" not in p.name)
                         + ["../benchmarks/recipes/oracle_fixtures.yaml"])
def test_the_committed_schema_accepts_every_shipped_recipe(recipe):
    validate(schema("recipe"), yaml.safe_load((ROOT / "recipes" / recipe).read_text("utf-8")), recipe)


def test_resolved_recipe_is_valid_and_stable(tmp_path):
    config = RunConfig.resolve(load_recipe("quickstart"))
    resolved = config.to_dict()
    assert resolved["oracle"]["backend"]["max_tokens"] == 48 and resolved["speak"]["sample_rate"] == 24000
    assert resolved["filters"]["max_seconds"] == 45.0  # a default the recipe never wrote
    path = tmp_path / "resolved.yaml"
    path.write_text(yaml.safe_dump({**resolved, "sources": [
        {**s, "path": str(config.recipe.resolve(s["path"]))} for s in resolved["sources"]]}), "utf-8")
    again = RunConfig.resolve(load_recipe(path))  # checked against the recipe schema
    assert json.dumps(again.to_dict()["speak"], sort_keys=True) == json.dumps(resolved["speak"], sort_keys=True)
    assert again.oracle == config.oracle and again.script == config.script


def test_bad_value_names_the_section(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("name: r\nsources: [{kind: gsm8k, path: x.jsonl}]\nspeak: {gap: [0.1, 0.2, 0.3]}\n", "utf-8")
    with pytest.raises(RecipeError, match=r"recipe r.yaml: speak.gap: \[0.1, 0.2, 0.3\] is too long"):
        RunConfig.resolve(load_recipe(path))


@dataclass(frozen=True)
class EchoConfig:
    """A plugin's own section."""

    times: int = 1  # how often each record is repeated


class EchoStep(Step):
    name = "echo"

    def run(self, batch):
        return [[record] * self.config.times for record in batch]


def test_a_registered_step_has_a_section_in_the_schema_and_the_recipe(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("name: r\nsources: [{kind: gsm8k, path: x.jsonl}]\necho: {times: 2}\n", "utf-8")
    with pytest.raises(RecipeError, match="echo: unknown key 'echo'"):
        RunConfig.resolve(load_recipe(path))
    spec = StepSpec(EchoStep, EchoConfig, order=45, output="echoed.jsonl", about="repeats every record")
    with pipeline.registered(spec):
        assert recipe_schema()["properties"]["echo"] == {
            "type": "object", "description": "Repeats every record.", "additionalProperties": False,
            "properties": {"times": {"type": "integer", "default": 1, "description": "how often each record is repeated"}}}
        config = RunConfig.resolve(load_recipe(path))
        assert config.echo == EchoConfig(times=2) and config.to_dict()["echo"] == {"times": 2}
        path.write_text("name: r\nsources: [{kind: gsm8k, path: x.jsonl}]\necho: {times: two}\n", "utf-8")
        with pytest.raises(RecipeError, match="recipe r.yaml: echo.times: 'two' is not of type 'integer'"):
            RunConfig.resolve(load_recipe(path))
    assert "echo" not in recipe_schema()["properties"]


@pytest.mark.slow
def test_manifest_stores_the_resolved_recipe(quickstart_out):
    manifest = json.loads((quickstart_out / "manifest.json").read_text("utf-8"))
    config = RunConfig.resolve(load_recipe("quickstart"))
    assert manifest["recipe"] == json.loads(json.dumps(config.to_dict()))
    assert manifest["config_hash"] == config.config_hash

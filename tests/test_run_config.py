"""The recipe resolved once: the schema and the config dataclasses say the same, the manifest keeps
the resolved form, and the resolved form is itself a valid recipe that resolves to the same."""

from __future__ import annotations

import json

import pytest
import yaml

from kame_data.recipe import RecipeError, load_recipe
from kame_data.resources import schema
from kame_data.runner.config import RunConfig, dataclass_keys, sections
from kame_data.speech.voice import VoiceConfig


def _resolve(node: dict, root: dict) -> dict:
    ref = node.get("$ref")
    if ref:
        target = root
        for part in ref.lstrip("#/").split("/"):
            target = target[part]
        return _resolve(target, root)
    return node


def schema_keys(node: dict, root: dict) -> dict:
    """Property names of a schema object, nested objects expanded (a oneOf's object branch too)."""
    node = _resolve(node, root)
    props = node.get("properties")
    if props is None:
        branch = next((b for b in node.get("oneOf", []) if "properties" in b), None)
        return schema_keys(branch, root) if branch else None
    return {k: schema_keys(v, root) for k, v in props.items()}


@pytest.mark.parametrize("section", sorted(sections()))
def test_schema_and_dataclasses_name_the_same_keys(section):
    root = schema("recipe")
    expected = schema_keys(root["properties"][section], root)
    actual = dataclass_keys(sections()[section])
    # voice pools are lists of VoiceConfig in the dataclass, a $def in the schema: compare them apart
    for role in ("assistant", "user"):
        if section == "speak":
            expected.pop(role), actual.pop(role)
    assert actual == expected


def test_voice_schema_matches_voice_config():
    root = schema("recipe")
    assert set(schema_keys(root["$defs"]["voice_mapping"], root)) == set(dataclass_keys(VoiceConfig))


def test_resolved_recipe_is_valid_and_stable(tmp_path):
    config = RunConfig.resolve(load_recipe("quickstart"))
    resolved = config.to_dict()
    assert resolved["oracle"]["backend"]["max_tokens"] == 48 and resolved["speak"]["sample_rate"] == 24000
    assert resolved["filters"]["max_seconds"] == 45.0  # a default the recipe never wrote
    path = tmp_path / "resolved.yaml"
    path.write_text(yaml.safe_dump({**resolved, "sources": [
        {**s, "path": str(config.recipe.resolve(s["path"]))} for s in resolved["sources"]]}), "utf-8")
    again = RunConfig.resolve(load_recipe(path))  # validates against the recipe schema on load
    assert json.dumps(again.to_dict()["speak"], sort_keys=True) == json.dumps(resolved["speak"], sort_keys=True)
    assert again.oracle == config.oracle and again.script == config.script


def test_bad_value_names_the_section(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("name: r\nsources: [{kind: gsm8k, path: x.jsonl}]\nspeak: {gap: [0.1, 0.2, 0.3]}\n", "utf-8")
    with pytest.raises(RecipeError, match="speak"):
        RunConfig.resolve(load_recipe(path))


@pytest.mark.slow
def test_manifest_stores_the_resolved_recipe(quickstart_out):
    manifest = json.loads((quickstart_out / "manifest.json").read_text("utf-8"))
    config = RunConfig.resolve(load_recipe("quickstart"))
    assert manifest["recipe"] == json.loads(json.dumps(config.to_dict()))
    assert manifest["config_hash"] == config.config_hash

import pytest

from kame_data.recipe import RecipeError, build_config, load_recipe
from kame_data.speech.stage import SpeakConfig


def test_bundled_quickstart_loads():
    r = load_recipe("quickstart")
    assert r.name == "quickstart" and len(r.sources) == 3
    assert r.resolve(r.sources[0].path).is_file()
    cfg = build_config(SpeakConfig, r.speak)
    assert cfg.pool("assistant")[0].engine == "piper" and cfg.pool("user")[0].engine == "hibari"


@pytest.mark.parametrize("yaml_text,needle", [
    ("name: x\nsources: [{kind: gsm8k, path: a.jsonl}]\nspeak: {asistant: {engine: piper}}\n", "speak.asistant"),
    ("name: x\nsources: [{kind: gsm8k, path: a.jsonl}]\noracle: {interval: -1}\n", "oracle.interval"),
    ("name: x\nsources: [{kind: trivia, path: a.jsonl}]\n", "sources[0].kind"),
    ("name: x\nsources: [{kind: gsm8k}]\n", "sources[0]"),
    ("sources: [{kind: gsm8k, path: a.jsonl}]\n", "name"),
])
def test_bad_recipe_names_the_key(tmp_path, yaml_text, needle):
    p = tmp_path / "r.yaml"
    p.write_text(yaml_text)
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert needle in str(e.value)


def test_missing_recipe(tmp_path):
    with pytest.raises(RecipeError, match="not found"):
        load_recipe(tmp_path / "nope.yaml")

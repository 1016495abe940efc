"""Loading a recipe: its own keys checked on load, every section checked and parsed once by the run
config, and a bad recipe named down to the file, the section and the key."""

import subprocess

import pytest

from kame_data.recipe import RecipeError, load_recipe
from kame_data.runner.config import RunConfig
from tests.conftest import CLI


def test_bundled_quickstart_loads():
    r = load_recipe("quickstart")
    assert r.name == "quickstart" and len(r.sources) == 3
    assert r.resolve(r.sources[0].path).is_file()
    cfg = RunConfig.resolve(r).speak
    assert cfg.pool("assistant")[0].engine == "piper" and cfg.pool("user")[0].engine == "hibari"


SOURCE = "sources: [{kind: gsm8k, path: a.jsonl}]\n"


@pytest.mark.parametrize("yaml_text,message", [
    ("name: x\n" + SOURCE + "speak: {asistant: {engine: piper}}\n",
     "recipe r.yaml: speak.asistant: unknown key 'asistant' (expected one of: answer, assistant, balance"),
    ("name: x\n" + SOURCE + "oracle: {interval: -1}\n",
     "recipe r.yaml: oracle.interval: -1 is less than or equal to the minimum of 0"),
    ("name: x\n" + SOURCE + "oracle: {backend: {kind: gpt}}\n",
     "recipe r.yaml: oracle.backend.kind: 'gpt' is not one of ['llamacpp', 'openai', 'vllm']"),
    ("name: x\n" + SOURCE + "script: {style: poem}\n",
     "recipe r.yaml: script.style: 'poem' is not one of ['template', 'llm', 'auto']"),
    ("name: x\n" + SOURCE + "filters: {skip: [tables]}\n", "recipe r.yaml: filters.skip[0]: 'tables' is not one of"),
    ("name: x\n" + SOURCE + "publish: {rows_per_shard: 0}\n",
     "recipe r.yaml: publish.rows_per_shard: 0 is less than the minimum of 1"),
    ("name: x\n" + SOURCE + "speak: {gap: [0.1, 0.2, 0.3]}\n", "recipe r.yaml: speak.gap: "),
    ("name: x\n" + SOURCE + "speak: {user: {engine: festival}}\n", "recipe r.yaml: speak.user.engine: 'festival' is not one of"),
    ("name: x\n" + SOURCE + "acoustics: {mic: [tin_can]}\n", "recipe r.yaml: acoustics.mic[0]: 'tin_can' is not one of"),
    ("name: x\n" + SOURCE + "speek: {gap: [0.1, 0.2]}\n", "recipe r.yaml: speek: unknown key 'speek' (expected one of: acoustics,"),
    ("name: x\nsources: [{kind: trivia, path: a.jsonl}]\n", "recipe r.yaml: sources[0].kind: 'trivia' is not one of"),
    ("name: x\nsources: [{kind: gsm8k}]\n", "recipe r.yaml: sources[0]: "),
    ("name: x\nsources: [{kind: gsm8k, path: a.jsonl, limit: 0}]\n", "recipe r.yaml: sources[0].limit: 0 is less than"),
    ("name: x\nsources: [{kind: jsonl, path: a.jsonl}]\n", "recipe r.yaml: sources[0]: 'fields' is a required property"),
    ("sources: [{kind: gsm8k, path: a.jsonl}]\n", "recipe r.yaml: <root>: 'name' is a required property"),
    ("name: x\n" + SOURCE + "batch_size: 0\n", "recipe r.yaml: batch_size: 0 is less than the minimum of 1"),
])
def test_bad_recipe_names_the_file_section_and_key(tmp_path, yaml_text, message):
    p = tmp_path / "r.yaml"
    p.write_text(yaml_text)
    with pytest.raises(RecipeError) as e:
        RunConfig.resolve(load_recipe(p))
    assert message in str(e.value)


def test_a_value_the_config_class_refuses_names_the_section(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("name: x\n" + SOURCE + "speak: {pauses: {sentence: [0.8, 0.4]}}\noracle: {early_truth: keep}\n")
    with pytest.raises(RecipeError, match=r"recipe r.yaml: speak: speak.pauses.sentence: give \[low, high\] seconds"):
        RunConfig.resolve(load_recipe(p))


def test_sources_are_checked_on_load(tmp_path):
    """The recipe's own keys (name, sources, seed, ...) need no step: `load_recipe` refuses them."""
    p = tmp_path / "r.yaml"
    p.write_text("name: x\nsources: [{kind: gsm8k, path: a.jsonl, hub: b/c}]\n")
    with pytest.raises(RecipeError, match=r"recipe r.yaml: sources\[0\]: .* is valid under each of"):
        load_recipe(p)
    p.write_text("name: x\nsources: []\n")
    with pytest.raises(RecipeError, match=r"recipe r.yaml: sources: \[\] should be non-empty"):
        load_recipe(p)


def test_run_refuses_a_bad_section_before_touching_out(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("name: x\n" + SOURCE + "oracle: {level5: guess}\n")
    r = subprocess.run(CLI + ["run", str(p), "--out", str(tmp_path / "out")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: recipe r.yaml: oracle.level5: 'guess' is not one of ['hint', 'call']"]
    assert not (tmp_path / "out").exists()


def test_missing_recipe(tmp_path):
    with pytest.raises(RecipeError, match="not found"):
        load_recipe(tmp_path / "nope.yaml")


def test_every_top_level_key_reaches_the_recipe(tmp_path):
    """`workers` and `device` were once read by nothing: a key the schema accepts must take effect."""
    p = tmp_path / "r.yaml"
    p.write_text("name: x\n" + SOURCE + "workers: 1\ndevice: cpu\nbatch_size: 3\nseed: 9\n")
    r = load_recipe(p)
    assert (r.workers, r.device, r.batch_size, r.seed) == (1, "cpu", 3, 9)
    p.write_text("name: x\n" + SOURCE + "device: gpu\n")
    with pytest.raises(RecipeError, match="device"):
        load_recipe(p)

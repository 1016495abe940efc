"""The paper recipe (recipes/kame_paper.yaml) as shipped, with its three hub sources pointed at local
dataset folders of real fixture rows (the real `datasets.load_dataset` path, offline) and its LLMs
at a loopback OpenAI server: the run casts the screened default user pool, and the card shows each
voice with its share (issue 33: not one espeak voice for every user)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kame_data.speech.voices import resolve
from tests.conftest import CLI, FIXTURES
from tests.loopback_server import LoopbackServer
from tests.quickstart_identity import rows

pytestmark = pytest.mark.slow


def local_hub(root: Path) -> dict[str, Path]:
    """Hub stand-ins laid out as the real repositories are: MMLU-Pro's test split, GSM8K's `main`
    config (declared in the card's YAML, as openai/gsm8k does), HSSBench's train split."""
    hub = {"mmlu_pro": root / "TIGER-Lab_MMLU-Pro", "gsm8k": root / "openai_gsm8k", "hssbench": root / "dozo_HSSBench"}
    (hub["mmlu_pro"]).mkdir(parents=True)
    shutil.copy(FIXTURES / "mmlu_pro_test_300.jsonl", hub["mmlu_pro"] / "test.jsonl")
    (hub["gsm8k"] / "main").mkdir(parents=True)
    shutil.copy(FIXTURES / "gsm8k_test_200.jsonl", hub["gsm8k"] / "main" / "train.jsonl")
    (hub["gsm8k"] / "README.md").write_text("---\nconfigs:\n- config_name: main\n  data_files:\n"
                                            "  - split: train\n    path: main/train.jsonl\n---\n")
    hub["hssbench"].mkdir(parents=True)
    shutil.copy(FIXTURES / "hssbench_own.jsonl", hub["hssbench"] / "train.jsonl")
    return hub


def test_the_paper_recipe_casts_the_default_user_pool(tmp_path, monkeypatch):
    raw = yaml.safe_load(Path("recipes/kame_paper.yaml").read_text())
    assert raw["speak"]["user"] == "users"
    hub = local_hub(tmp_path / "hub")
    for source in raw["sources"]:
        source["hub"] = str(hub[source["kind"]])
    out = tmp_path / "out"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with LoopbackServer() as srv:
        loopback = {"kind": "openai", "model": "loopback", "base_url": srv.base_url, "concurrency": 16}
        raw["oracle"]["backend"] = loopback
        raw["script"]["llm"]["backend"] = loopback  # its rewrites fail the checks: the template stands in
        recipe = tmp_path / "paper.yaml"
        recipe.write_text(yaml.safe_dump(raw))
        r = subprocess.run(CLI + ["run", str(recipe), "--out", str(out), "--limit", "6", "-q"],
                           capture_output=True, text=True, timeout=2400)
    assert r.returncode == 0, r.stderr[-3000:]
    got = rows(out)
    assert {row["source"] for row in got} == {"mmlu_pro", "gsm8k", "hssbench"}
    pool = {v.label for v in resolve("users", "user")}
    users = {t["voice"] for row in got for t in row["turns"] if t["role"] == "user"}
    assert users and users <= pool and len(users) >= 3, users
    manifest = json.loads((out / "manifest.json").read_text())
    card = (out / "README.md").read_text()
    cast = {v for v, x in manifest["quality"]["voices"].items() if x["role"] == "user"}
    assert f"User pool: {len(cast)} of its {len(pool)} voices cast" in card and "| espeak:" not in card
    for voice, v in manifest["quality"]["voices"].items():
        if v["role"] == "user":
            assert voice in pool and f"| {voice} | user | {v['turns']} |" in card

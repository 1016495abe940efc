"""The runner: resume after SIGKILL, recompute only what changed, the Ray executor, status."""

import hashlib
import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from kame_data.recipe import load_recipe
from tests.conftest import CLI
from tests.loopback_server import LoopbackServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    with LoopbackServer(latency=0.01) as srv:
        yield srv


def make_recipe(tmp: Path, base_url: str, **oracle) -> Path:
    """The quickstart's items and voices, with the oracle on the loopback OpenAI server (fast)."""
    qs = load_recipe("quickstart")
    raw = json.loads(json.dumps(qs.raw))
    for s in raw["sources"]:
        s["path"] = str(qs.resolve(s["path"]))
    raw["oracle"] = {"interval": 0.5, "target": "assistant",
                     "backend": {"kind": "openai", "model": "loopback", "base_url": base_url, **oracle}}
    raw["publish"] = {"rows_per_shard": 2}
    raw["batch_size"] = 1
    path = tmp / "recipe.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def run_cli(recipe: Path, out: Path, *extra: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + ["run", str(recipe), "--out", str(out), "--limit", "4", "-q", *extra],
                          capture_output=True, text=True, timeout=900, env=env or os.environ.copy())


def row_hashes(out: Path) -> dict[str, str]:
    rows = [r for p in sorted((out / "data").glob("*.parquet")) for r in pq.read_table(p).to_pylist()]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "duplicate rows"
    return {r["id"]: hashlib.sha256(json.dumps(r, sort_keys=True, default=lambda b: b.hex()).encode()).hexdigest()
            for r in rows}


def partial_files(out: Path) -> list[Path]:
    return [p for p in out.rglob("*") if p.name.endswith(".tmp") or ".staging" in p.parts]


def test_sigkill_resume_gives_the_same_dataset(tmp_path, server):
    recipe = make_recipe(tmp_path, server.base_url)
    ref = tmp_path / "ref"
    t = time.perf_counter()
    r = run_cli(recipe, ref)
    assert r.returncode == 0, r.stderr[-2000:]
    full = time.perf_counter() - t
    expected = row_hashes(ref)
    assert len(expected) == 4

    out = tmp_path / "killed"
    rng = random.Random(7)
    for attempt in range(5):
        proc = subprocess.Popen(CLI + ["run", str(recipe), "--out", str(out), "--limit", "4", "-q"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.5, full))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    r = run_cli(recipe, out)
    assert r.returncode == 0, r.stderr[-2000:]
    assert row_hashes(out) == expected
    assert not partial_files(out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["samples"] == 4


def test_changing_oracle_config_recomputes_only_oracle(tmp_path, server):
    out = tmp_path / "out"
    r = run_cli(make_recipe(tmp_path, server.base_url), out)
    assert r.returncode == 0, r.stderr[-2000:]
    first = json.loads((out / "manifest.json").read_text())
    assert first["computed"] == {"script": 4, "speak": 4, "oracle": 4}

    again = run_cli(make_recipe(tmp_path, server.base_url), out)
    assert again.returncode == 0
    assert json.loads((out / "manifest.json").read_text())["computed"] == {"script": 0, "speak": 0, "oracle": 0}

    calls = server.calls
    changed = run_cli(make_recipe(tmp_path, server.base_url, temperature=0.3), out)
    assert changed.returncode == 0, changed.stderr[-2000:]
    m = json.loads((out / "manifest.json").read_text())
    assert m["computed"] == {"script": 0, "speak": 0, "oracle": 4}
    assert server.calls > calls  # the new temperature means new requests
    status = subprocess.run(CLI + ["status", str(out)], capture_output=True, text=True)
    assert status.returncode == 0 and "[done]" in status.stdout and "oracle" in status.stdout


def test_ray_executor_matches_local(tmp_path, quickstart_out):
    pytest.importorskip("ray")
    env = os.environ.copy()
    env["KAME_DATA_CACHE_DIR"] = str(tmp_path / "fresh-cache")  # the Ray run asks the LLM itself
    out = tmp_path / "ray"
    r = subprocess.run(CLI + ["run", "quickstart", "--out", str(out), "--limit", "3", "-q", "--executor", "ray"],
                       capture_output=True, text=True, timeout=1200, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert row_hashes(out) == row_hashes(quickstart_out)
    local, ray = (json.loads((o / "manifest.json").read_text()) for o in (quickstart_out, out))
    assert ray["executor"] == "ray" and local["executor"] == "local"
    for key in ("counts", "computed", "rejects", "levels", "per_source", "oracle_events"):
        assert ray[key] == local[key], key
    assert ray["computed"] == {"script": 3, "speak": 3, "oracle": 3}
    asked = lambda m: m["llm"]["calls"] + m["llm"]["cache_hits"]  # noqa: E731 - the cache state differs
    assert (ray["llm"]["backend"], ray["llm"]["model"], asked(ray)) == (local["llm"]["backend"], local["llm"]["model"],
                                                                        asked(local)) and asked(ray) > 0


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_budget_stop_publishes_what_is_done(tmp_path, server, executor):
    """A budget reached mid-run ends the run cleanly on either executor: the finished dialogues are
    published, the manifest says why it stopped, and nothing went past the budget by a batch."""
    if executor == "ray":
        pytest.importorskip("ray")
    recipe = make_recipe(tmp_path, server.base_url, prompt_price_per_million=100.0,
                         completion_price_per_million=100.0, concurrency=4)
    raw = yaml.safe_load(recipe.read_text())
    raw["oracle"]["budget_usd"] = 0.3  # a dialogue's ladder costs about $0.15 at these prices
    recipe.write_text(yaml.safe_dump(raw))
    out = tmp_path / executor
    r = run_cli(recipe, out, "--executor", executor, "--no-cache")  # every answer paid for in this run
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((out / "manifest.json").read_text())
    assert m["stopped"].startswith("budget") and m["executor"] == executor
    assert 1 <= m["counts"]["samples"] < 4
    assert m["llm"]["cost_usd"] >= 0.3

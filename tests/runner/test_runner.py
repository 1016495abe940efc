"""The runner: resume after SIGKILL, transient rejects retried, exact budgets, recompute only what
changed, the Ray executor, status."""

import hashlib
import json
import os
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from kame_data.llm.base import ChatRequest
from kame_data.llm.cache import RequestCache
from kame_data.recipe import load_recipe
from tests.conftest import CLI
from tests.loopback_server import LoopbackServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    with LoopbackServer(latency=0.01) as srv:
        yield srv


def make_recipe(tmp: Path, base_url: str, **oracle) -> Path:
    """The quickstart's items and steps, with the oracle on the loopback OpenAI server (fast). These
    runs test the runner and the LLM client, not casting: the user is one voice (hibari's heart)
    rather than the quickstart's pool of eight, whose screening and Kokoro voices these runs do not
    need to pay for (tests/speech casts the pools). Not a slowed Joe: his 'photosynthesis' runs past
    the 1 s run rule and one of the 12 dialogues is rejected early_truth."""
    qs = load_recipe("quickstart")
    raw = json.loads(json.dumps(qs.raw))
    for s in raw["sources"]:
        s["path"] = str(qs.resolve(s["path"]))
    raw["speak"]["user"] = "heart"
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


def own_cache(tmp: Path) -> dict:
    """The environment of a run with an LLM cache of its own (the session's may hold its answers)."""
    return {**os.environ, "KAME_DATA_CACHE_DIR": str(tmp)}


def body_key(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run of the test recipe (fresh server, fresh cache): its rows, how long it
    took, what it computed, and how many distinct requests it needed."""
    tmp = tmp_path_factory.mktemp("reference")
    with LoopbackServer(latency=0.01) as srv:
        recipe = make_recipe(tmp, srv.base_url)
        t = time.perf_counter()
        r = run_cli(recipe, tmp / "out", env=own_cache(tmp / "cache"))
        seconds = time.perf_counter() - t
        assert r.returncode == 0, r.stderr[-2000:]
        distinct = len(srv.bodies)
    manifest = json.loads((tmp / "out" / "manifest.json").read_text())
    assert manifest["computed"] == {"script": 4, "speak": 4, "quality": 4, "acoustics": 4, "oracle": 4}
    return {"rows": row_hashes(tmp / "out"), "seconds": seconds, "requests": distinct, "manifest": manifest,
            "out": tmp / "out"}


def test_ten_sigkills_then_resume_gives_the_same_dataset(tmp_path, reference):
    """Ten kills at random moments, each landing on a live run (it died by SIGKILL), then a run
    that completes: it resumes (its `computed` counts are below an uninterrupted run's) and its
    dataset equals the uninterrupted one, with no partial file anywhere.

    While the kills go on, the server answers only 70% of the distinct requests the dataset needs
    and holds the rest (a stalled service), so no run can finish before its kill lands. The first
    seven kills fall at random moments of the run; the last three wait until that run has reached
    the service (how long the steps before it take depends on the machine's load), then fall at a
    random moment shortly after, so some kills always land while oracle work is in flight."""
    expected = reference["rows"]
    assert len(expected) == 4
    quota = int(0.7 * reference["requests"])
    served: set[str] = set()
    lock, gate = threading.Lock(), threading.Event()

    def stall(body, seen, headers):
        key = body_key(body)
        with lock:
            if gate.is_set() or key in served or len(served) < quota:
                served.add(key)
                return None
        gate.wait()
        return 503, {"error": {"message": "held"}}, {}

    out, env = tmp_path / "killed", own_cache(tmp_path / "cache")
    rng = random.Random(14)
    moments = []
    with LoopbackServer(latency=0.01, override=stall) as srv:
        recipe = make_recipe(tmp_path, srv.base_url)
        for kill in range(10):
            calls = srv.calls
            proc = subprocess.Popen(CLI + ["run", str(recipe), "--out", str(out), "--limit", "4", "-q"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            t0 = time.perf_counter()
            if kill < 7:
                time.sleep(rng.uniform(0.05, 0.5) * reference["seconds"])
            else:
                deadline = t0 + 3 * reference["seconds"]
                while srv.calls == calls and proc.poll() is None and time.perf_counter() < deadline:
                    time.sleep(0.05)
                assert srv.calls > calls, "the run never reached the oracle service"
                time.sleep(rng.uniform(0.0, 0.5))
            moment = time.perf_counter() - t0
            assert proc.poll() is None, "the run ended before its kill"
            proc.send_signal(signal.SIGKILL)
            assert proc.wait() == -signal.SIGKILL
            moments.append(round(moment, 1))
        gate.set()
        assert srv.answers, "no kill landed after any work"
        r = run_cli(recipe, out, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert row_hashes(out) == expected
    assert not partial_files(out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["samples"] == 4
    final, full = manifest["computed"], reference["manifest"]["computed"]
    assert all(final[s] <= full[s] for s in full) and sum(final.values()) < sum(full.values()), (final, moments)
    assert final["speak"] < 4, final  # rendered audio came from the checkpoints of killed runs
    print(f"kill moments (s): {moments}; final run computed {final}, an uninterrupted run {full}")


def test_changing_oracle_config_recomputes_only_oracle(tmp_path, server):
    out = tmp_path / "out"
    r = run_cli(make_recipe(tmp_path, server.base_url), out)
    assert r.returncode == 0, r.stderr[-2000:]
    first = json.loads((out / "manifest.json").read_text())
    assert first["computed"] == {"script": 4, "speak": 4, "quality": 4, "acoustics": 4, "oracle": 4}

    again = run_cli(make_recipe(tmp_path, server.base_url), out)
    assert again.returncode == 0
    assert json.loads((out / "manifest.json").read_text())["computed"] == {"script": 0, "speak": 0, "quality": 0, "acoustics": 0, "oracle": 0}

    calls = server.calls
    changed = run_cli(make_recipe(tmp_path, server.base_url, temperature=0.3), out)
    assert changed.returncode == 0, changed.stderr[-2000:]
    m = json.loads((out / "manifest.json").read_text())
    assert m["computed"] == {"script": 0, "speak": 0, "quality": 0, "acoustics": 0, "oracle": 4}
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
    assert ray["computed"] == {"script": 3, "speak": 3, "quality": 3, "acoustics": 3, "oracle": 3}
    asked = lambda m: m["llm"]["calls"] + m["llm"]["cache_hits"]  # noqa: E731 - the cache state differs
    assert (ray["llm"]["backend"], ray["llm"]["model"], asked(ray)) == (local["llm"]["backend"], local["llm"]["model"],
                                                                        asked(local)) and asked(ray) > 0


def _questions(rows_dir: Path) -> dict[str, str]:
    """The first user turn's spoken words of each reference row, by id."""
    rows = [r for p in sorted((rows_dir / "data").glob("*.parquet")) for r in pq.read_table(p).to_pylist()]
    return {r["id"]: next(t["spoken"] for t in r["turns"] if t["role"] == "user") for r in rows}


def _words(text: str, n: int = 6) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())[:n]


def test_transient_failures_are_retried_without_rendering_again(tmp_path, reference):
    """The server fails every request whose conversation is one of two chosen dialogues (once it
    has heard their first words) on the first run and serves them on the second: the first run
    publishes the other two and keeps those two as transient rejects; the second completes them
    from the rendered audio it already has."""
    questions = _questions(reference["out"])
    chosen = dict(sorted(questions.items())[:2])
    prefixes = [" ".join(_words(q)) for q in chosen.values()]
    assert all(" ".join(_words(q)) not in prefixes for i, q in questions.items() if i not in chosen)
    failing = {"on": True}

    def fail_chosen(body, seen, headers):
        said = " ".join(_words(body["messages"][-1]["content"], 100_000))
        if failing["on"] and any(p in said for p in prefixes):
            return 500, {"error": {"message": "injected outage"}}, {}
        return None

    out, env = tmp_path / "out", own_cache(tmp_path / "cache")
    with LoopbackServer(latency=0.01, override=fail_chosen) as srv:
        recipe = make_recipe(tmp_path, srv.base_url, max_retries=1, backoff_base=0.01,
                             max_consecutive_failures=10_000)
        r = run_cli(recipe, out, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        first = json.loads((out / "manifest.json").read_text())
        rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
        status = subprocess.run(CLI + ["status", str(out)], capture_output=True, text=True).stdout
        failing["on"] = False
        r = run_cli(recipe, out, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
    assert first["counts"]["samples"] == 2 and first["rejects_transient"] == {"llm_failed": 2}
    assert sorted(x["id"] for x in rejects if x.get("transient")) == sorted(chosen)
    assert all(x["reason"] == "llm_failed" and "http_500" in x["detail"] for x in rejects if x.get("transient"))
    assert "2 transient (rerun the same command to retry them)" in status, status
    second = json.loads((out / "manifest.json").read_text())
    assert second["computed"] == {"script": 0, "speak": 0, "quality": 0, "acoustics": 0, "oracle": 2}  # no audio rendered again
    assert second["retried"] == {"script": 0, "speak": 0, "quality": 0, "acoustics": 0, "oracle": 2}
    assert second["counts"]["samples"] == 4 and second["rejects_transient"] == {}
    assert row_hashes(out) == reference["rows"]
    status = subprocess.run(CLI + ["status", str(out)], capture_output=True, text=True).stdout
    assert "0 transient" in status and re.search(r"oracle:.* 2 retried", status), status


def test_exact_budget_keeps_every_answer_and_a_rerun_finishes(tmp_path, reference):
    """Concurrency 32 and a budget of about half the dataset's LLM cost: the spend the server billed
    stays within the budget, every answer it sent is in the cache, and a rerun with a larger
    budget completes the dataset without sending any request twice."""
    prices = dict(prompt_price_per_million=100.0, completion_price_per_million=100.0)
    usage = reference["manifest"]["llm_usage"]
    full = (usage["prompt_tokens"] + usage["completion_tokens"]) * 100.0 / 1e6
    budget = round(full * 0.6, 4)
    out, env = tmp_path / "out", own_cache(tmp_path / "cache")
    with LoopbackServer(latency=0.01) as srv:
        recipe = make_recipe(tmp_path, srv.base_url, concurrency=32, **prices)
        raw = yaml.safe_load(recipe.read_text())
        raw["oracle"]["budget_usd"] = budget
        recipe.write_text(yaml.safe_dump(raw))
        r = run_cli(recipe, out, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        first = json.loads((out / "manifest.json").read_text())
        billed, answers = srv.billed(100.0, 100.0), list(srv.answers)
        cache = RequestCache(tmp_path / "cache" / "llm-cache.sqlite")
        keys = [ChatRequest(tuple((m["role"], m["content"]) for m in b["messages"]), b["max_tokens"],
                            b["temperature"], b["seed"]).key("openai", "loopback") for _, b, _, _ in answers]
        assert all(cache.get(k) is not None for k in keys), "an answer paid for is not in the cache"
        cache.close()
        raw["oracle"]["budget_usd"] = budget * 10
        recipe.write_text(yaml.safe_dump(raw))
        r = run_cli(recipe, out, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        assert srv.calls == len(srv.bodies) == reference["requests"]  # each request sent once in all
    assert first["stopped"].startswith("budget") and 1 <= first["counts"]["samples"] < 4
    assert billed <= budget and abs(first["llm_usage"]["cost_usd"] - billed) < 1e-6
    assert first["llm_usage"]["budget_usd"] == budget and "oracle" in first["llm_usage"]["stages"]
    second = json.loads((out / "manifest.json").read_text())
    assert "stopped" not in second and second["counts"]["samples"] == 4
    assert row_hashes(out) == reference["rows"]


@pytest.mark.parametrize("executor", ["local", "ray"])
def test_budget_stop_publishes_what_is_done(tmp_path, server, executor):
    """A budget reached mid-run ends the run cleanly on either executor: the finished dialogues are
    published, the manifest says why it stopped, and the spend is within the budget, stopped only
    when not one more request's worst case fit."""
    if executor == "ray":
        pytest.importorskip("ray")
    recipe = make_recipe(tmp_path, server.base_url, prompt_price_per_million=100.0,
                         completion_price_per_million=100.0, concurrency=4)
    raw = yaml.safe_load(recipe.read_text())
    budget = 1.2  # a dialogue's ladder (its prompts carry the few-shot examples) costs about $0.4-0.5 here
    raw["oracle"]["budget_usd"] = budget
    recipe.write_text(yaml.safe_dump(raw))
    out = tmp_path / executor
    r = run_cli(recipe, out, "--executor", executor, env=own_cache(tmp_path / "cache"))
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((out / "manifest.json").read_text())
    assert m["stopped"].startswith("budget") and m["executor"] == executor
    assert 1 <= m["counts"]["samples"] < 4
    worst = 2500 * 100.0 / 1e6  # a request's prompt bound and max_tokens, generously
    assert budget - worst < m["llm_usage"]["cost_usd"] <= budget and m["llm"]["cost_usd"] == m["llm_usage"]["cost_usd"]

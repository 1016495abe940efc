"""`kame-data run` against a misbehaving OpenAI-compatible server on loopback: a refusal for one
dialogue leaves every other dialogue in the dataset and one final `llm_refused` reject that a
rerun does not ask again; a server that answers `Retry-After: 3600` or trickles its body one byte
every half second holds the run no longer than the bound its config sets, and the run completes
with transient rejects where the server never answered.

The speech is rendered once (the module's first run); each test's run starts from a copy of its
checkpoints, under an oracle model name of its own, so only the oracle step is computed."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from tests.conftest import CLI
from tests.loopback_server import LoopbackServer, Trickle, refusal
from tests.runner.test_runner import _questions, _words, make_recipe, own_cache, run_cli

pytestmark = pytest.mark.slow

KEYLIKE = "sk-live0123456789abcdefXYZ"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The rendered run's checkpoints, its dialogues' first words, and how long the oracle step
    takes from those checkpoints when every request is answered (a second run, another model)."""
    tmp = tmp_path_factory.mktemp("rendered")
    with LoopbackServer(latency=0.01) as srv:
        r = run_cli(make_recipe(tmp, srv.base_url), tmp / "out", "--checkpoints", str(tmp / "ck"),
                    env=own_cache(tmp / "cache"))
        assert r.returncode == 0, r.stderr[-2000:]
        recipe = make_recipe(tmp, srv.base_url, model="loopback-answers", concurrency=256)
        r = run_cli(recipe, tmp / "answered", "--checkpoints", str(tmp / "ck"), env=own_cache(tmp / "cache"))
        assert r.returncode == 0, r.stderr[-2000:]
    answered = json.loads((tmp / "answered" / "manifest.json").read_text())
    assert answered["computed"]["oracle"] == 4 and answered["computed"]["speak"] == 0
    questions = _questions(tmp / "out")
    prefixes = {i: " ".join(_words(q)) for i, q in sorted(questions.items())}
    assert len(set(prefixes.values())) == 4 and all(
        p not in q for i, p in prefixes.items() for j, q in questions.items() if i != j)
    return {"checkpoints": tmp / "ck", "prefixes": prefixes, "answered_oracle_s": answered["wall"]["oracle"]}


def _said(body: dict) -> str:
    return " ".join(_words(body["messages"][-1]["content"], 100_000))


def _setup(tmp_path, rendered, base_url: str, model: str, **oracle):
    """The test recipe on `base_url`, and a copy of the rendered run's checkpoints."""
    ck = tmp_path / "ck"
    shutil.copytree(rendered["checkpoints"], ck)
    return make_recipe(tmp_path, base_url, model=model, **oracle), ck


def _rejects(out) -> list[dict]:
    return [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]


def test_a_refused_dialogue_is_one_final_reject_and_a_rerun_does_not_ask_again(tmp_path, rendered):
    chosen, prefix = next(iter(rendered["prefixes"].items()))

    def content_filter(body, seen, headers):
        if prefix in _said(body):
            return refusal(f"The prompt was flagged by the content filter (request by {KEYLIKE})")
        return None

    out, env = tmp_path / "out", own_cache(tmp_path / "cache")
    with LoopbackServer(latency=0.01, override=content_filter) as srv:
        recipe, ck = _setup(tmp_path, rendered, srv.base_url, "loopback-refuses")
        r = run_cli(recipe, out, "--checkpoints", str(ck), env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        first, first_rejects = json.loads((out / "manifest.json").read_text()), _rejects(out)
        calls = srv.calls
        r = run_cli(recipe, out, "--checkpoints", str(ck), env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        assert srv.calls == calls  # the refusal is final: not asked again
    refused = [x for x in first_rejects if x["reason"] == "llm_refused"]
    assert [x["id"] for x in refused] == [chosen] and not refused[0].get("transient")
    assert "HTTP 400: The prompt was flagged by the content filter" in refused[0]["detail"]
    assert KEYLIKE not in (out / "rejects.jsonl").read_text() + (out / "run.log").read_text()
    assert first["counts"]["samples"] == 3 and first["rejects_transient"] == {}
    assert first["computed"]["oracle"] == 4 and first["computed"]["speak"] == 0  # speech came from checkpoints
    assert first["llm"]["refused"] >= 1
    second = json.loads((out / "manifest.json").read_text())
    assert second["computed"]["oracle"] == 0 and second["counts"]["samples"] == 3
    assert [x for x in _rejects(out) if x["reason"] == "llm_refused"] == refused


def test_a_run_against_a_server_that_stalls_is_bounded(tmp_path, rendered):
    """One dialogue's requests meet `429, Retry-After: 3600`, another's a body trickled one byte
    every half second, the other two are answered. The oracle step ends within the bound the
    config sets (every attempt to its deadline, every wait its longest) beyond what the answered
    dialogues take; the run completes with those two as transient rejects, and its log,
    progress.json and manifest show the retries and the capped Retry-After."""
    (late_id, late), (slow_id, slow) = list(rendered["prefixes"].items())[1:3]

    def stall(body, seen, headers):
        said = _said(body)
        if late in said:
            return 429, {"error": {"message": "Rate limit reached, try again in an hour"}}, {"Retry-After": "3600"}
        return Trickle(0.5) if slow in said else None

    # An item deadline past every wait: the bound is the retries' (test_llm_outage_runs.py has the
    # default one, under which a dialogue told to wait an hour gives up at once).
    oracle = dict(timeout=1.5, max_retries=1, max_retry_after=1.0, backoff_base=0.05, concurrency=256,
                  item_deadline=10_000)
    bound = (oracle["max_retries"] + 1) * oracle["timeout"] + oracle["max_retries"] * max(
        oracle["max_retry_after"], oracle["backoff_base"])
    out = tmp_path / "out"
    with LoopbackServer(latency=0.01, override=stall) as srv:
        recipe, ck = _setup(tmp_path, rendered, srv.base_url, "loopback-stalls", **oracle)
        started = time.perf_counter()
        r = run_cli(recipe, out, "--checkpoints", str(ck), env=own_cache(tmp_path / "cache"))
        wall = time.perf_counter() - started
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((out / "manifest.json").read_text())
    answered = rendered["answered_oracle_s"]  # the same step when the server answers everything
    print(f"stalling server: oracle step {m['wall']['oracle']:.2f} s, bound {bound:.2f} s + {answered:.2f} s "
          f"(the step when every request is answered); whole run {wall:.1f} s")
    assert m["wall"]["oracle"] <= bound + answered + 3.0, (m["wall"], bound, answered)
    assert m["counts"]["samples"] == 2 and m["rejects_transient"] == {"llm_failed": 2}
    failed = {x["id"]: x["detail"] for x in _rejects(out) if x.get("transient")}
    assert set(failed) == {late_id, slow_id}
    assert "rate_limited" in failed[late_id] and "timeout" in failed[slow_id]
    assert m["llm"]["retry_after_capped"] >= 1 and m["llm"]["failed_attempts"] >= 4
    assert "asked to wait 3600 s (Retry-After); waiting 1.0 s (max_retry_after)" in r.stderr
    assert "asked to wait 3600 s (Retry-After)" in (out / "run.log").read_text()
    progress = json.loads((out / "progress.json").read_text())
    assert progress["llm"]["retries"] >= 2 and progress["llm"]["last_error"] in ("rate_limited", "timeout")
    status = subprocess.run(CLI + ["status", str(out)], capture_output=True, text=True)
    assert "Retry-After capped at max_retry_after" in status.stdout, status.stdout

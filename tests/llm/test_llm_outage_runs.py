"""`kame-data run` on the whole quickstart (12 dialogues) with the oracle on a loopback server that
misbehaves: one dialogue's requests failing (a trickled body, 429 with Retry-After: 3600, a
connection reset, a 500) cost that dialogue and nothing else; a server that goes down for good
stops the run, which publishes what it finished; a rate limit on every request pauses the backend
once. Every rerun with the fault gone completes to the dataset an uninterrupted run makes, from
the audio already rendered (docs/concepts/simulator-llm.md, "When the LLM service misbehaves"; llm/health.py).

The speech is rendered once (the module's reference run, on a server that answers everything);
each test starts from a copy of its speech checkpoints, with an LLM cache of its own."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import CLI
from tests.loopback_server import RESET, LoopbackServer, Trickle
from tests.runner.test_runner import _questions, _words, make_recipe, own_cache, row_hashes

pytestmark = pytest.mark.slow

DIALOGUES = 12  # the quickstart's 13 items, one rejected needs_image


def _run(recipe: Path, out: Path, ck: Path, cache: Path, **popen) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + ["run", str(recipe), "--out", str(out), "--checkpoints", str(ck), "-q"],
                          capture_output=True, text=True, timeout=900, env=own_cache(cache))


def _said(body: dict) -> str:
    return " ".join(_words(body["messages"][-1]["content"], 100_000))


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def _transient(out: Path) -> dict[str, str]:
    rows = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    return {r["id"]: r["detail"] for r in rows if r.get("transient")}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The uninterrupted run: its speech checkpoints (without the oracle's), its rows, each
    dialogue's first words in row order, and how long its oracle step took."""
    tmp = tmp_path_factory.mktemp("outage")
    with LoopbackServer(latency=0.01) as srv:
        r = _run(make_recipe(tmp, srv.base_url, concurrency=256), tmp / "ref", tmp / "ck", tmp / "cache")
        assert r.returncode == 0, r.stderr[-3000:]
        shutil.rmtree(tmp / "ck" / "oracle")  # every test computes the oracle step again
        # The oracle step alone (speech from checkpoints, a fresh cache), as the tests run it.
        timed = tmp / "timed"
        timed.mkdir()
        shutil.copytree(tmp / "ck", timed / "ck")
        r = _run(make_recipe(timed, srv.base_url, concurrency=64), timed / "out", timed / "ck", timed / "cache")
        assert r.returncode == 0, r.stderr[-3000:]
    m = _manifest(tmp / "ref")
    assert m["counts"]["samples"] == DIALOGUES and not m["rejects_transient"]
    oracle_s = _manifest(timed / "out")["wall"]["oracle"]
    questions = _questions(tmp / "ref")  # in row order, which is input order
    prefixes = [(i, " ".join(_words(q))) for i, q in questions.items()]
    assert len({p for _, p in prefixes}) == DIALOGUES and all(
        p not in " ".join(_words(q, 100_000)) for i, p in prefixes for j, q in questions.items() if i != j)
    return {"ck": tmp / "ck", "hashes": row_hashes(tmp / "ref"), "prefixes": prefixes,
            "oracle_s": oracle_s}


def _checkpoints(tmp_path: Path, world: dict) -> Path:
    ck = tmp_path / "ck"
    shutil.copytree(world["ck"], ck)
    return ck


FAULTS = {  # what the server does to the chosen dialogue's requests, and the reason its reject names
    "trickled_body": (lambda: Trickle(0.5), "timeout"),
    "retry_after_3600": (lambda: (429, {"error": {"message": "Rate limit reached for this prompt, try again in an "
                                                             "hour"}}, {"Retry-After": "3600"}), "rate_limited"),
    "connection_reset": (lambda: RESET, "connection_error"),
    "http_500": (lambda: (500, {"error": {"message": "the model crashed on this prompt"}}, {}), "http_500"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_one_failing_dialogue_costs_only_that_dialogue(tmp_path, world, fault):
    """Only the chosen dialogue's requests fail: the run exits 0 with the other 11 dialogues and
    that one a transient reject naming its reason, within the time the settings allow beyond the
    uninterrupted oracle step; with the fault gone the rerun computes only that dialogue, renders
    no audio, and its dataset is the uninterrupted run's."""
    bad_id, bad = world["prefixes"][3]
    answer, reason = FAULTS[fault]
    faulty = {"on": True}

    def override(body, seen, headers):
        return answer() if faulty["on"] and bad in _said(body) else None

    oracle = dict(timeout=1.0, item_deadline=3.0, max_retries=6, backoff_base=0.05, concurrency=64)
    ck, cache, out = _checkpoints(tmp_path, world), tmp_path / "cache", tmp_path / "out"
    with LoopbackServer(latency=0.01, override=override) as srv:
        recipe = make_recipe(tmp_path, srv.base_url, **oracle)
        r = _run(recipe, out, ck, cache)
        assert r.returncode == 0, r.stderr[-3000:]
        first, failed = _manifest(out), _transient(out)
        faulty["on"] = False
        again = _run(recipe, out, ck, cache)
    assert first["counts"]["samples"] == DIALOGUES - 1 and first["rejects_transient"] == {"llm_failed": 1}
    assert list(failed) == [bad_id] and failed[bad_id].startswith(reason), failed
    if fault != "connection_reset":  # the server's own words reach the reject (scrubbed)
        assert ("try again in an hour" in failed[bad_id]) == (fault == "retry_after_3600")
    # The bad dialogue's requests give up within item_deadline of its first failure (each attempt
    # cut to what is left of it); everything else runs as in the uninterrupted run.
    bound = world["oracle_s"] + oracle["item_deadline"] + oracle["timeout"] + 5.0
    print(f"{fault}: oracle step {first['wall']['oracle']:.1f} s (uninterrupted {world['oracle_s']:.1f} s, "
          f"bound {bound:.1f} s); reject: {failed[bad_id]}")
    assert first["wall"]["oracle"] <= bound, (first["wall"], bound)
    assert first["llm"]["items_gave_up"] == {reason: 1}
    assert again.returncode == 0, again.stderr[-3000:]
    second = _manifest(out)
    assert second["counts"]["samples"] == DIALOGUES and not second["rejects_transient"]
    assert second["computed"]["speak"] == 0 and second["computed"]["oracle"] == 1
    assert row_hashes(out) == world["hashes"]


def _oracle_done(ck: Path) -> int:
    return sum(1 for _ in (ck / "oracle").rglob("*.rec")) if (ck / "oracle").is_dir() else 0


def test_an_outage_stops_the_run_and_publishes_what_was_done(tmp_path, world):
    """Five dialogues are answered while the others' requests are held; once those five are done
    the server goes down for every request: the run stops with one line (exit 3), data/ holds the
    five (valid), the manifest says it stopped and why; the rerun with the server back completes
    to the uninterrupted dataset without rendering again."""
    order = world["prefixes"]
    chosen = [order[i] for i in (0, 1, 3, 4, 6)]  # among the first 8: the executor's window of batches
    others = [p for i, p in order if (i, p) not in chosen]
    down, release = threading.Event(), threading.Event()
    unavailable = (503, {"error": {"message": "Service Unavailable: the model server is restarting"}}, {})

    def override(body, seen, headers):
        if down.is_set():
            return unavailable
        said = _said(body)
        if any(p in said for p in others):
            release.wait(120)  # held until the server goes down
            return unavailable
        return None

    oracle = dict(outage_after=1.0, max_retries=50, backoff_base=0.05, concurrency=256)
    ck, cache, out = _checkpoints(tmp_path, world), tmp_path / "cache", tmp_path / "out"
    with LoopbackServer(latency=0.01, override=override) as srv:
        recipe = make_recipe(tmp_path, srv.base_url, **oracle)
        proc = subprocess.Popen(CLI + ["run", str(recipe), "--out", str(out), "--checkpoints", str(ck), "-q"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=own_cache(cache))
        try:
            end = time.monotonic() + 600
            while _oracle_done(ck) < len(chosen):
                assert proc.poll() is None, proc.communicate()[1][-3000:]
                assert time.monotonic() < end, "the chosen dialogues never finished"
                time.sleep(0.05)
            down.set()
            release.set()
            stdout, stderr = proc.communicate(timeout=600)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 3, stdout[-2000:] + stderr[-3000:]
        stopped = [line for line in stderr.splitlines() if line.startswith("stopped:")]
        assert len(stopped) == 1 and "answered no request for" in stopped[0] and "rerun the same command" in stopped[0]
        assert "Traceback" not in stderr
        m = _manifest(out)
        assert m["stopped"].startswith("aborted: ") and "outage_after" in m["stopped"]
        assert set(row_hashes(out)) == {i for i, _ in chosen} and m["counts"]["samples"] == len(chosen)
        assert json.loads((out / "progress.json").read_text())["state"] == "stopped"
        valid = subprocess.run(CLI + ["validate", str(out)], capture_output=True, text=True)
        assert valid.returncode == 0, valid.stdout + valid.stderr
        down.clear()
        srv.override = None
        again = _run(recipe, out, ck, cache)
    assert again.returncode == 0, again.stderr[-3000:]
    second = _manifest(out)
    assert "stopped" not in second and second["computed"]["speak"] == 0
    assert second["computed"]["oracle"] == DIALOGUES - len(chosen)
    assert row_hashes(out) == world["hashes"]


def test_a_rate_limit_on_every_request_pauses_the_backend_once(tmp_path, world):
    """For 10 s every request gets `429, Retry-After: 2`: the backend pauses once (one line on
    the terminal), sends at most one request per pause (counted at the server), and the run
    completes with every dialogue, the uninterrupted run's rows."""
    limit_s, retry_after = 10.0, 2.0
    lock, arrivals, limited = threading.Lock(), [], {"start": None}

    def override(body, seen, headers):
        now = time.monotonic()
        with lock:
            limited["start"] = limited["start"] or now
            arrivals.append(now)
            on = now - limited["start"] < limit_s
        if on:
            return 429, {"error": {"message": "Rate limit reached for requests"}}, {"Retry-After": f"{retry_after:g}"}
        return None

    ck, cache, out = _checkpoints(tmp_path, world), tmp_path / "cache", tmp_path / "out"
    with LoopbackServer(latency=0.01, override=override) as srv:
        recipe = make_recipe(tmp_path, srv.base_url, concurrency=64)
        r = _run(recipe, out, ck, cache)
    assert r.returncode == 0, r.stderr[-3000:]
    pauses = [line for line in r.stderr.splitlines() if "is rate limiting" in line]
    assert len(pauses) == 1 and "pausing every request" in pauses[0], r.stderr[-3000:]
    assert "sending resumed" in r.stderr
    m = _manifest(out)
    assert m["counts"]["samples"] == DIALOGUES and not m["rejects_transient"]
    assert m["llm"]["rate_limit_pauses"] == 1 and m["llm"]["rate_limit_paused_s"] >= limit_s - 2 * retry_after
    assert row_hashes(out) == world["hashes"]
    start = limited["start"]
    burst = [t for t in arrivals if t - start < 0.5]  # sent before the client heard its first 429s
    during = [t for t in arrivals if 0.5 <= t - start < limit_s]
    gaps = [b - a for a, b in zip(during, during[1:])]
    print(f"rate limit: {len(burst)} requests in the first burst, {len(during)} during the pause "
          f"(gaps {[round(g, 2) for g in gaps]}), {len(arrivals)} in all")
    # One request per pause of `retry_after` (the probe): never two within one pause.
    assert len(during) <= limit_s / retry_after + 1 and all(g >= retry_after * 0.9 for g in gaps), gaps

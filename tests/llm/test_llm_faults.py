"""A misbehaving OpenAI-compatible server, over real HTTP on loopback: a refusal (HTTP 400/413/422)
is a final reject of its item and never aborts the run; every attempt has a total deadline, which
a body trickled one byte every half second cannot stretch; Retry-After is capped at
max_retry_after; retries and waits show in progress.json and `kame-data status` while they
happen; a full LLM-cache disk is one warning line."""

from __future__ import annotations

import errno
import json
import logging
import sqlite3
import subprocess
import threading
import time
from collections import Counter
from types import SimpleNamespace

import pytest

from kame_data.llm.base import REFUSED, Capabilities, ChatBackend, ChatRequest, ChatResult
from kame_data.llm.cache import CachedBackend, RequestCache, SharedRequestCache
from kame_data.llm.config import BackendConfig
from kame_data.llm.openai_backend import OpenAIBackend
from kame_data.llm.service_errors import BackendConfigError
from kame_data.oracle.config import OracleConfig
from kame_data.oracle.stage import OracleStage
from kame_data.records import Dialogue, Reject, Sample, SourceItem, Turn
from kame_data.runner.progress import Progress
from kame_data.script.llm import rewrite_batch
from kame_data.script.config import ScriptConfig
from kame_data.storage import Storage
from kame_data.step import RunContext
from tests.conftest import CLI
from tests.loopback_server import LoopbackServer, Trickle, refusal
from tests.synthetic import synthetic_dialogue, timed_dialogue
from tests.steps import run_flat

KEYLIKE = "sk-live0123456789abcdefXYZ"  # a key a server echoes in its reason: scrubbed everywhere


def _said(body: dict) -> str:
    return body["messages"][-1]["content"]


def _wait_until(condition, timeout: float = 30.0, every: float = 0.02) -> None:
    """Wait for an event (a condition turning true), failing after `timeout` seconds."""
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "the awaited event did not happen"
        time.sleep(every)


def _key(body: dict) -> str:
    req = ChatRequest(tuple((m["role"], m["content"]) for m in body["messages"]), max_tokens=body["max_tokens"],
                      temperature=body["temperature"], seed=body["seed"])
    return req.key("openai", "loopback")


def _forbidden_dialogue() -> object:
    turns = [Turn("user", "B", "Forbidden topic ahead: which planet is the red one, mars or venus?",
                  "forbidden topic ahead which planet is the red one mars or venus"),
             Turn("assistant", "A", "It is mars, because iron oxide covers its surface.",
                  "it is mars because iron oxide covers its surface")]
    return timed_dialogue(Dialogue("forbidden-0-v0", "forbidden-0", "synthetic", "misc", 0, turns))


def test_a_refused_dialogue_is_one_final_reject_and_the_others_go_on(tmp_path):
    """The server refuses every request that carries one dialogue's words (a content filter): that
    dialogue is one final `llm_refused` reject with the server's reason (scrubbed), each refused
    request was asked once (no retry, no new seed) and is not in the cache; every other dialogue
    is a sample."""
    refused_bodies: list[dict] = []
    lock = threading.Lock()

    def content_filter(body, seen, headers):
        if "forbidden" in _said(body):
            with lock:
                refused_bodies.append(body)
            return refusal(f"The prompt was flagged by the content filter (request by {KEYLIKE})")
        return None

    dialogues = [synthetic_dialogue(i) for i in range(4)] + [_forbidden_dialogue()]
    cache = RequestCache(tmp_path / "c.sqlite")
    with LoopbackServer(override=content_filter) as srv:
        stage = OracleStage(OracleConfig(backend=BackendConfig(kind="openai", model="loopback", base_url=srv.base_url,
                                                               max_consecutive_failures=1000)), RunContext(cache=cache))
        out = run_flat(stage, dialogues)
        summary = stage.summary()
        stage.teardown()
    rejects = [o for o in out if isinstance(o, Reject) and o.reason == "llm_refused"]
    assert [r.id for r in rejects] == ["forbidden-0-v0"] and not rejects[0].transient
    assert "HTTP 400" in rejects[0].detail and "content filter" in rejects[0].detail
    assert KEYLIKE not in rejects[0].detail and "[redacted]" in rejects[0].detail
    samples = {o.id for o in out if isinstance(o, Sample)}
    assert samples == {d.id for d in dialogues[:4]}
    assert refused_bodies  # each refused request was asked once:
    assert len({json.dumps(b, sort_keys=True) for b in refused_bodies}) == len(refused_bodies)
    assert {b["seed"] for b in refused_bodies} == {0}  # no retry round with a new seed
    assert all(cache.get(_key(b)) is None for b in refused_bodies)  # a refusal is not an answer
    assert summary["refused"] == len(refused_bodies) and summary["predictions"]["refused"] == len(refused_bodies)


@pytest.mark.parametrize("status,payload,aborts", [
    (401, {"error": {"message": "Incorrect API key provided"}}, True),
    (403, {"error": {"message": "Project does not have access"}}, True),
    (404, {"error": {"message": "The model `loopback-9.5` does not exist or you do not have access to it."}}, True),
    (400, {"error": {"message": "Invalid model name passed", "code": "model_not_found"}}, True),
    (400, {"error": {"message": "This model's maximum context length is 2048 tokens. However, you requested "
                                "4100 tokens.", "code": "context_length_exceeded"}}, False),
    (413, {"error": {"message": "Request entity too large"}}, False),
    (422, {"error": {"message": "Unprocessable: messages[1].content flagged"}}, False),
])
def test_only_authentication_and_unknown_model_errors_abort(status, payload, aborts):
    """One of two requests meets the error: 401, 403, 404 and an unknown model abort (no request
    can succeed); 400, 413 and 422 refuse that request only, and the other is answered."""
    def one_fails(body, seen, headers):
        return (status, payload, {}) if "second" in _said(body) else None

    reqs = [ChatRequest((("user", "first question"),)), ChatRequest((("user", "second question"),))]
    with LoopbackServer(override=one_fails) as srv:
        backend = OpenAIBackend("loopback", base_url=srv.base_url, concurrency=1, max_retries=3, backoff_base=0.01)
        if aborts:
            with pytest.raises(BackendConfigError, match=f"HTTP {status}"):
                backend.complete(reqs)
        else:
            first, second = backend.complete(reqs)
            assert first.text and not first.error
            assert second.error == REFUSED and second.refusal.startswith(f"HTTP {status}: ")
            assert payload["error"]["message"][:40] in second.refusal
        second_asked = sum(1 for _, _ in srv.arrivals) - 1
        backend.close()
    assert second_asked == 1  # never retried


def test_a_service_that_refuses_every_request_is_a_configuration_error():
    """A refusal of every request (a bad parameter, say) is no verdict on the items: a batch that
    ends with `max_consecutive_failures` requests refused and none answered aborts the run. One
    answer among them (refusals come back first) shows the refusals are the items' own."""
    def refuse(body, seen, headers):
        if "answerable" in _said(body):
            return None
        return refusal("Unsupported parameter: 'seed'", code="unsupported_parameter")

    with LoopbackServer(override=refuse, latency=0.3) as srv:
        backend = OpenAIBackend("loopback", base_url=srv.base_url, concurrency=32, max_consecutive_failures=5)
        with pytest.raises(BackendConfigError, match="refused all of the first 20 requests and answered none"):
            backend.complete([ChatRequest((("user", f"q{i}"),)) for i in range(20)])
        backend.close()
        fresh = OpenAIBackend("loopback", base_url=srv.base_url, concurrency=32, max_consecutive_failures=5)
        results = fresh.complete([ChatRequest((("user", f"q{i}"),)) for i in range(20)]
                                 + [ChatRequest((("user", "an answerable one"),))])
        fresh.close()
    assert sum(r.refused for r in results) == 20 and results[-1].text


def _worst_case(cfg: BackendConfig, retry_after: bool, backoff_max: float = 30.0) -> float:
    """The longest one request may take under `cfg`: every attempt runs to its deadline and every
    wait is its longest (the backoff's cap for that attempt, or max_retry_after when the server
    sends Retry-After)."""
    waits = sum(max(min(backoff_max, cfg.backoff_base * 2 ** a), cfg.max_retry_after if retry_after else 0.0)
                for a in range(cfg.max_retries))
    return (cfg.max_retries + 1) * cfg.timeout + waits


def _backend(srv, cfg: BackendConfig) -> OpenAIBackend:
    return OpenAIBackend(cfg.model, base_url=srv.base_url, concurrency=cfg.concurrency, timeout=cfg.timeout,
                         max_retries=cfg.max_retries, backoff_base=cfg.backoff_base,
                         max_retry_after=cfg.max_retry_after, max_consecutive_failures=cfg.max_consecutive_failures,
                         item_deadline=cfg.item_deadline, outage_after=cfg.outage_after)


def test_retry_after_3600_ends_within_the_configured_deadline(caplog):
    """Every request of one item meets `429, Retry-After: 3600`, and the item's deadline is longer
    than that: each waits max_retry_after instead, and the batch ends within the bound computed
    from the config; the caps are counted, and the waits are announced with a warning line that
    requests waiting at once share."""
    cfg = BackendConfig(kind="openai", model="loopback", timeout=2.0, max_retries=2, backoff_base=0.05,
                        max_retry_after=1.0, concurrency=8, item_deadline=10_000)
    bound = _worst_case(cfg, retry_after=True)
    late = (429, {"error": {"message": "Rate limit reached, try again in an hour"}}, {"Retry-After": "3600"})
    with LoopbackServer(override=lambda body, seen, headers: late) as srv, \
            caplog.at_level(logging.WARNING, logger="kame_data.llm.openai_backend"):
        backend = _backend(srv, cfg)
        started = time.perf_counter()
        results = backend.complete([ChatRequest((("user", f"question {i}"),)) for i in range(4)])
        wall = time.perf_counter() - started
        summary = backend.summary()
        backend.close()
    print(f"Retry-After 3600: wall {wall:.2f} s, bound {bound:.2f} s")
    assert all(r.error == "rate_limited" for r in results)
    assert cfg.max_retries * cfg.max_retry_after <= wall <= bound + 2.0, (wall, bound)
    # The four requests share one item: once one of them gives up, a request of that item that has not
    # yet begun its next attempt returns the same verdict without trying (openai_backend._attempts), so
    # on a busy machine a lagging request may skip its last attempt. Every capped wait follows a failure.
    assert cfg.max_retries <= summary["retry_after_capped"] <= 4 * cfg.max_retries
    assert summary["retry_after_capped"] + 1 <= summary["failed_attempts"] <= 4 * (cfg.max_retries + 1)
    assert summary["retry_wait_s"] >= summary["retry_after_capped"] * cfg.max_retry_after
    lines = [r.getMessage() for r in caplog.records if "Retry-After" in r.getMessage()]
    assert 1 <= len(lines) <= cfg.max_retries, lines  # up to eight waits, one line per stretch of waiting
    assert "asked to wait 3600 s (Retry-After); waiting 1.0 s (max_retry_after)" in lines[0]


def test_a_body_trickled_one_byte_per_half_second_ends_within_the_deadline():
    """The server sends headers, then one byte of the answer every half second: no single read
    ever waits as long as `timeout`, but each attempt is cut at its total deadline (measured at
    the server too), and the batch ends within the bound computed from the config."""
    cfg = BackendConfig(kind="openai", model="loopback", timeout=1.5, max_retries=1, backoff_base=0.05,
                        concurrency=8)
    bound = _worst_case(cfg, retry_after=False)
    with LoopbackServer(override=lambda body, seen, headers: Trickle(0.5)) as srv:
        backend = _backend(srv, cfg)
        started = time.perf_counter()
        results = backend.complete([ChatRequest((("user", f"question {i}"),)) for i in range(3)])
        wall = time.perf_counter() - started
        backend.close()
        _wait_until(lambda: len(srv.trickles) == 6)  # the server notices each hang-up
        trickles = list(srv.trickles)
    print(f"trickled body: wall {wall:.2f} s, bound {bound:.2f} s")
    assert all(r.error == "timeout" for r in results)
    assert wall <= bound + 2.0, (wall, bound)
    full = trickles[0][3] * 0.5  # what the whole body takes: far past every deadline
    assert full > 20 * cfg.timeout
    assert all(sent < size for _, _, sent, size in trickles)
    # each attempt ended at its deadline (the server sees the hang-up at its next byte)
    assert all(end - start <= cfg.timeout + 1.2 for start, end, _, _ in trickles), trickles


def test_progress_shows_retries_while_they_wait(tmp_path):
    """A request told `Retry-After: 3600` on first sight (its item's deadline longer than that)
    waits max_retry_after (2 s): while it waits, progress.json already counts the retry, the capped
    Retry-After and the error, says until when it waits and which item waits why; `kame-data
    status` prints it. Then the answer comes, and the item no longer waits."""
    def first_sight(body, seen, headers):
        return (429, {"error": {"message": "slow down"}}, {"Retry-After": "3600"}) if seen == 0 else None

    config = SimpleNamespace(name="waits", config_hash="0" * 16)
    progress = Progress(tmp_path, config, 1, ["oracle"], "local")
    progress.save()
    path = tmp_path / "progress.json"

    def llm_state():
        return json.loads(path.read_text()).get("llm")

    with LoopbackServer(override=first_sight) as srv:
        backend = OpenAIBackend("loopback", base_url=srv.base_url, max_retry_after=2.0, backoff_base=0.01,
                                item_deadline=10_000)
        done: list = []
        worker = threading.Thread(target=lambda: done.extend(
            backend.complete([ChatRequest((("user", "q"),), item="gsm8k-0007-v0")])))
        worker.start()
        _wait_until(lambda: llm_state() is not None)
        during, now, waiting = llm_state(), time.time(), worker.is_alive()
        # `status` reads a copy taken during the wait: on a busy machine it may start after the wait
        snap = tmp_path / "snap"
        snap.mkdir()
        (snap / "progress.json").write_text(json.dumps({**json.loads(path.read_text()), "llm": during}))
        status = subprocess.run(CLI + ["status", str(snap)], capture_output=True, text=True)
        worker.join(30)
        backend.close()
    assert waiting, "the request had finished before progress.json showed its wait"
    assert during["retries"] == 1 and during["retry_after_capped"] == 1 and during["last_error"] == "rate_limited"
    assert during["waiting_until"] > now and during["retry_wait_s"] >= 2.0
    assert status.returncode == 0 and "llm: 1 retries (last error: rate_limited)" in status.stdout, status.stdout
    assert "1 Retry-After capped at max_retry_after" in status.stdout and "waiting" in status.stdout
    assert during["waiting_items"] == 1 and during["waiting"]["gsm8k-0007-v0"]["error"] == "rate_limited"
    assert "1 item(s) waiting on the LLM service" in status.stdout
    assert "gsm8k-0007-v0: rate_limited (HTTP 429: slow down (Retry-After 3600 s))" in status.stdout, status.stdout
    assert done and done[0].text
    assert llm_state()["waiting_items"] == 0  # answered: it waits no more


def _full_sqlite(self, key, result):
    raise sqlite3.OperationalError("database or disk is full")


def _full_folder(self, name, data):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("kind", ["sqlite", "folder"])
def test_a_full_cache_disk_is_one_warning_line(tmp_path, monkeypatch, caplog, kind):
    """The cache's disk fills up: 23 answers still come back, and the log has one warning line
    (the cache's path, the OS error, what happens next), no traceback."""
    if kind == "sqlite":
        cache = RequestCache(tmp_path / "c.sqlite")
        monkeypatch.setattr(RequestCache, "put", _full_sqlite)
    else:
        cache = SharedRequestCache(str(tmp_path / "shared"))
        monkeypatch.setattr(Storage, "write", _full_folder)
    with LoopbackServer() as srv, caplog.at_level(logging.INFO):
        backend = CachedBackend(OpenAIBackend("loopback", base_url=srv.base_url), cache)
        results = backend.complete([ChatRequest((("user", f"question {i}"),)) for i in range(23)])
        again = backend.complete([ChatRequest((("user", "question 0"),))])
        summary = backend.summary()
        backend.inner.close()
    assert all(r.text for r in results) and again[0].text and srv.calls == 24  # nothing stored, nothing lost
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(noisy) == 1 and noisy[0].exc_info is None, [r.getMessage() for r in noisy]
    line = noisy[0].getMessage()
    assert str(cache.path) in line and ("disk is full" in line or "No space left" in line)
    assert "goes on without caching" in line
    assert summary["cache_store_failed"]


class _Chains(ChatBackend):
    """A backend that answers chains (as the embedded model does), without a model."""

    name, model = "chains", "echo"
    capabilities = Capabilities(chains=True)

    def complete(self, requests, on_answer=None):
        return [c[0] for c in self.complete_chains([[r] for r in requests])]

    def complete_chains(self, chains):
        return [[ChatResult(f"echo {r.messages[-1][1]}") for r in chain] for chain in chains]


def test_a_full_cache_disk_is_one_warning_line_for_chained_answers_too(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(RequestCache, "put", _full_sqlite)
    backend = CachedBackend(_Chains(), RequestCache(tmp_path / "c.sqlite"))
    with caplog.at_level(logging.INFO):
        out = backend.complete_chains([[ChatRequest((("user", f"d{d} s{s}"),)) for s in range(4)] for d in range(6)])
    assert [r.text for r in out[5]] == [f"echo d5 s{s}" for s in range(4)]
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(noisy) == 1 and "database or disk is full" in noisy[0].getMessage()


def _open_item(question: str) -> SourceItem:
    return SourceItem(id="open-1", source="mt_bench", category="writing", question=question, options=[], answer="",
                      answer_letter="")


def test_a_refused_rewrite_falls_back_to_the_template():
    """`script.style: llm` against a content filter: a refused rewrite is not asked again and the
    template stands in (`fallback_llm_refused`); an item without a template is a final
    `llm_refused` reject; the other items get their rewrites asked as usual."""
    mc = SourceItem(id="mmlu_pro-1", source="mmlu_pro", category="law", question="Which act outlawed monopolies?",
                    options=["The Clayton Act", "The Wagner Act", "The Sherman Act", "The Taft Act"],
                    answer="The Sherman Act", answer_letter="C")
    banned = SourceItem(id="mmlu_pro-2", source="mmlu_pro", category="law", question="Which forbidden act was it?",
                        options=["The Clayton Act", "The Wagner Act"], answer="The Wagner Act", answer_letter="B")
    asked: Counter[str] = Counter()

    def content_filter(body, seen, headers):
        text = _said(body)
        asked["forbidden" if "forbidden" in text else "other"] += 1
        return refusal(f"flagged ({KEYLIKE})") if "forbidden" in text else None

    cfg = ScriptConfig(style="llm")
    with LoopbackServer(override=content_filter) as srv:
        backend = OpenAIBackend("loopback", base_url=srv.base_url)
        stats: Counter[str] = Counter()
        out = rewrite_batch([mc, banned, _open_item("Write a forbidden poem.")], cfg, 0, backend, stats)
        backend.close()
    assert asked["forbidden"] == 2  # one request each, never again with a new seed
    assert asked["other"] == cfg.llm.retries + 1  # the loopback's replies are no rewrite: asked, retried
    assert isinstance(out[1], Dialogue) and out[1].id == "mmlu_pro-2-v0"  # the template
    assert stats["fallback_llm_refused"] == 1 and stats["refused_llm_refused"] == 2
    assert isinstance(out[2], Reject) and out[2].reason == "llm_refused" and not out[2].transient
    assert "HTTP 400: flagged" in out[2].detail and KEYLIKE not in out[2].detail

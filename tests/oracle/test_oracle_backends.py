"""The oracle stage through the openai backend against a real local HTTP server (with faults),
the request cache, budgets and failure handling."""

import re

import pytest

from kame_data.llm.accounting import Account, BudgetExceeded, Meter, Prices, prompt_token_bound
from kame_data.llm.base import ChatRequest
from kame_data.llm.cache import CachedBackend, RequestCache
from kame_data.llm.config import BackendConfig
from kame_data.llm.limits import BackendUnavailable, backoff_delay
from kame_data.llm.openai_backend import OpenAIBackend
from kame_data.oracle.ladder import ladder
from kame_data.oracle.config import OracleConfig
from kame_data.oracle.stage import OracleStage
from kame_data.records import CHANNEL, Reject, Sample
from kame_data.step import RunContext
from tests.loopback_server import Faults, LoopbackServer
from tests.synthetic import synthetic_dialogue
from tests.steps import run_flat


def _stage(server, cache=None, **backend):
    cfg = OracleConfig(backend=BackendConfig(kind="openai", model="loopback", base_url=server.base_url,
                                             concurrency=32, **backend))
    st = OracleStage(cfg, RunContext(cache=cache))
    st.setup()
    return st


def test_cache_sends_each_distinct_request_once(tmp_path):
    dialogues = [synthetic_dialogue(i) for i in range(6)] + [synthetic_dialogue(0)]  # one duplicate dialogue
    with LoopbackServer() as srv:
        cache = RequestCache(tmp_path / "c.sqlite")
        st = _stage(srv, cache)
        out = run_flat(st, dialogues)
        assert all(isinstance(o, Sample) for o in out)
        assert srv.calls == len(srv.bodies) == st.backend.calls  # calls made = distinct requests
        first = srv.calls
        # a second stage over the same cache (a rerun): no call at all
        st2 = _stage(srv, RequestCache(tmp_path / "c.sqlite"))
        out2 = run_flat(st2, dialogues)
        assert srv.calls == first and st2.backend.calls == 0
        assert [o.oracle for o in out2] == [o.oracle for o in out]


def test_a_dialogues_retries_do_not_wait_for_the_rest_of_its_batch():
    """Dialogue 1's first answers are all non-replies; dialogue 0's requests are held by the server
    until it has seen dialogue 1 ask again. Sent in rounds (every dialogue's first attempts, then
    every retry), dialogue 1's retries would wait for dialogue 0's answers and the server would wait
    for ever (here: until `held` gives up); sent per dialogue, they go out at once."""
    import threading

    from tests.loopback_server import reply_for

    slow, quick = synthetic_dialogue(0), synthetic_dialogue(2)
    def words(text: str) -> str:  # a transcript without its speaker labels (the prompt names them its own way)
        return re.sub(r"(^|\n)(A|B|User|Assistant): ", r"\1", text)

    contexts = {d.id: {words(s.conversation_context) for s in ladder(d.words, 0.5, CHANNEL["A"], CHANNEL)}
                for d in (slow, quick)}
    assert not contexts[slow.id] & contexts[quick.id]

    def whose(messages) -> str:
        """The dialogue whose longest transcript the request shows."""
        text = words("\n".join(m["content"] for m in messages))
        return max(((len(c), d) for d, cs in contexts.items() for c in cs if c in text), default=(0, ""))[1]

    retried, held_too_long = threading.Event(), []

    def held(body, seen, headers):
        if body.get("seed", 0) > 0 and whose(body["messages"]) == quick.id:
            retried.set()
        elif whose(body["messages"]) == slow.id and not retried.wait(60):
            held_too_long.append(body)
        return None

    def reply(messages, asked):
        return "" if whose(messages) == quick.id and asked == 0 else reply_for(messages)

    with LoopbackServer(override=held, reply=reply) as srv:
        out = run_flat(_stage(srv), [slow, quick])
    samples = {o.id: o for o in out if isinstance(o, Sample)}
    assert retried.is_set() and not held_too_long
    assert set(samples) == {slow.id, quick.id} and all(e.prediction for s in samples.values() for e in s.oracle)


def test_level5_and_trigger_options():
    r = synthetic_dialogue(3)
    every = ladder(r.words, 0.5, CHANNEL["A"], CHANNEL)
    fresh = ladder(r.words, 0.5, CHANNEL["A"], CHANNEL, only_new_words=True)
    assert len(fresh) <= len(every)
    counts = [s.total_word_count for s in fresh]
    assert counts == sorted(set(counts))
    with LoopbackServer() as srv:
        st = OracleStage(OracleConfig(level5="call", backend=BackendConfig(kind="openai", model="m",
                                                                           base_url=srv.base_url)))
        st.setup()
        run_flat(st, [r])
        # every step is asked, level 5 included; steps with the same words ask the same thing once
        assert srv.calls == len({(s.conversation_context, s.level, s.true_reply) for s in every})
        assert any(s.level == 5 for s in every)


def test_fault_injection_every_dialogue_complete_or_rejected():
    dialogues = [synthetic_dialogue(i, seed=5) for i in range(24)]
    faults = Faults(error_500=0.20, rate_429=0.05, hang=0.05, garbage=0.02, retry_after=0.05, hang_seconds=2.0)
    with LoopbackServer(latency=0.01, faults=faults, seed=11) as srv:
        st = _stage(srv, timeout=0.5, max_retries=6, backoff_base=0.02)
        out = run_flat(st, dialogues)
    by_id = {}
    for o in out:
        by_id.setdefault(o.id.split("@")[0], []).append(o)
    assert set(by_id) == {d.id for d in dialogues}
    for d in dialogues:
        results = by_id[d.id]
        samples = [o for o in results if isinstance(o, Sample)]
        rejects = [o for o in results if isinstance(o, Reject)]
        assert all(r.reason in {"llm_failed", "empty_prediction"} and r.detail for r in rejects)
        assert all(r.transient == (r.reason == "llm_failed") for r in rejects)  # the service's failures are retried
        if samples:
            expected = [s.timestamp_ms for s in ladder(d.words, 0.5, CHANNEL["A"], CHANNEL)]
            dropped = {int(r.id.split("@")[1]) for r in rejects if r.reason == "empty_prediction"}
            assert [e.timestamp_ms for e in samples[0].oracle] == [t for t in expected if t not in dropped]
            assert all(len(e.prediction.split()) >= 3 for e in samples[0].oracle)
        else:
            assert any(r.reason == "llm_failed" for r in rejects)
    assert st.backend.inner.failures > 0  # faults really happened and were retried


def test_retry_after_is_honoured():
    assert backoff_delay(0, 0.01, 1.0, retry_after=0.7) >= 0.7
    assert backoff_delay(10, 0.01, 1.0) <= 1.0


def test_backend_waits_for_retry_after_before_retrying():
    """A 429 with `Retry-After: 2` on each request's first arrival: the backend sends each one again
    no sooner than 2 s later (measured at the server), and not much later either."""
    def first_sight_429(body, seen, headers):
        return (429, {"error": {"message": "slow down"}}, {"Retry-After": "2"}) if seen == 0 else None

    with LoopbackServer(override=first_sight_429) as srv:
        backend = OpenAIBackend("m", base_url=srv.base_url, concurrency=8, backoff_base=0.01)
        res = backend.complete([ChatRequest((("user", f"question {i}"),)) for i in range(4)])
        arrivals = list(srv.arrivals)
    assert all(r.text and not r.error for r in res) and backend.failures == 4
    by_body: dict[str, list[float]] = {}
    for t, digest in arrivals:
        by_body.setdefault(digest, []).append(t)
    waits = sorted(ts[1] - ts[0] for ts in by_body.values())
    assert len(waits) == 4 and all(len(ts) == 2 for ts in by_body.values())
    assert waits[0] >= 2.0 and waits[-1] < 3.0, waits


def test_tpm_bucket_limits_tokens_per_minute():
    """tpm 12,000 (200 tokens a second, a one-second burst): eight requests of about 100 tokens
    each take at least (800 - 200) / 200 = 3 s, measured at the server; without tpm, a fraction of that."""
    reqs = [ChatRequest((("user", f"question number {i:02d}"),), max_tokens=96) for i in range(8)]
    tokens = [sum(len(c) for _, c in r.messages) // 4 + r.max_tokens for r in reqs]  # the client's estimate
    assert sum(tokens) == 800

    def span(tpm):
        with LoopbackServer() as srv:
            OpenAIBackend("m", base_url=srv.base_url, concurrency=8, tpm=tpm).complete(reqs)
            times = sorted(t for t, _ in srv.arrivals)
        return times[-1] - times[0]

    free, limited = span(None), span(12_000)
    assert free < 0.5 and limited >= 3.0 * 0.97, (free, limited)
    rate = (sum(tokens) - 200) / limited * 60  # tokens per minute past the burst, over the window
    assert rate <= 12_000 * 1.02, rate


def test_a_service_failing_every_item_is_an_outage_and_one_item_never_is():
    """Every request fails (HTTP 500) for requests of three items: once none was answered for
    `outage_after`, the batch raises BackendUnavailable naming the rule. The same failures for one
    item only, while another item is answered, give that item up after its retries and raise nothing."""
    with LoopbackServer(faults=Faults(error_500=1.0)) as srv:
        backend = OpenAIBackend("m", base_url=srv.base_url, max_retries=50, backoff_base=0.02, backoff_max=0.05,
                                outage_after=0.5, concurrency=4)
        with pytest.raises(BackendUnavailable, match=r"answered no request for \d+ s while requests of 3 dialogues"):
            backend.complete([ChatRequest((("user", f"q{i}"),), item=f"d{i % 3}") for i in range(9)])
        with pytest.raises(BackendUnavailable):  # the service stays down for this backend: no more requests
            backend.complete([ChatRequest((("user", "another"),), item="d9")])
        backend.close()

    def one_bad(body, seen, headers):
        return (500, {"error": {"message": "this one again"}}, {}) if "bad" in body["messages"][-1]["content"] else None

    with LoopbackServer(latency=0.01, override=one_bad) as srv:
        backend = OpenAIBackend("m", base_url=srv.base_url, max_retries=3, backoff_base=0.3, outage_after=0.2,
                                concurrency=4)
        reqs = [ChatRequest((("user", f"bad {i}"),), item="bad") for i in range(3)] + \
               [ChatRequest((("user", f"good {i}"),), item=f"good{i}") for i in range(30)]
        results = backend.complete(reqs)
        backend.close()
    assert all(r.error == "http_500" and "this one again" in r.detail for r in results[:3])
    assert all(r.text and not r.error for r in results[3:])
    assert backend.summary()["items_gave_up"] == {"http_500": 1}


def test_budget_stops_spending():
    with LoopbackServer() as srv:
        meter = Meter(budget_usd=150)  # $1 a token: a request bills $10, its worst case is $69
        account = Account(meter, Prices(prompt_per_million=1e6, completion_per_million=0))
        backend = OpenAIBackend("m", base_url=srv.base_url, concurrency=1, meter=account)
        with pytest.raises(BudgetExceeded, match="budget"):
            backend.complete([ChatRequest((("user", "x" * 40 + str(i)),)) for i in range(20)])
        assert srv.calls == 9 and srv.billed(1e6, 0) == meter.spent_usd() == 90  # a 10th might cost $69, $60 are left


def _cached_keys(cache, answers, model="m"):
    """Whether each answered request body is in the cache, under the key the client uses."""
    out = []
    for _, body, _, _ in answers:
        req = ChatRequest(tuple((m["role"], m["content"]) for m in body["messages"]), max_tokens=body["max_tokens"],
                          temperature=body["temperature"], seed=body["seed"])
        out.append(cache.get(req.key("openai", model)) is not None)
    return out


def test_budget_is_exact_under_concurrency_and_no_answer_is_lost(tmp_path):
    """32 requests in flight at once and a budget worth about half of 200: the spend the server
    billed never passes the budget, and the run stops only when not even one more request's worst
    case fits; every answer it sent is in the cache although the batch was stopped; a second client
    with a larger budget finishes the batch without sending anything twice."""
    prices = Prices(prompt_per_million=100.0, completion_per_million=10_000.0)  # ~$0.06 a request, $0.25 at worst
    reqs = [ChatRequest((("system", "Answer briefly."), ("user", f"Item {i}: what is {i} plus {i}?")), max_tokens=24)
            for i in range(200)]
    cache = RequestCache(tmp_path / "c.sqlite")
    with LoopbackServer(latency=0.05) as srv:
        meter = Meter(budget_usd=6.0)
        first = CachedBackend(OpenAIBackend("m", base_url=srv.base_url, concurrency=32,
                                            meter=Account(meter, prices)), cache)
        with pytest.raises(BudgetExceeded, match=r"LLM budget of \$6.0000 reached"):
            first.complete(reqs)
        billed = srv.billed(100.0, 10_000.0)
        answered = len(srv.answers)
        worst = prices.cost(prompt_token_bound(reqs[-1].messages), 24)
        assert 6.0 - worst < billed <= 6.0, (billed, worst)  # at the budget, not a batch before or after it
        assert abs(meter.spent_usd() - billed) < 1e-6
        assert 20 < answered < 200 and all(_cached_keys(cache, srv.answers))
        assert first.calls == answered  # refused requests were never sent
        second = CachedBackend(OpenAIBackend("m", base_url=srv.base_url, concurrency=32,
                                             meter=Account(Meter(budget_usd=100.0), prices)), cache)
        res = second.complete(reqs)
        assert all(r.text for r in res) and second.cache_hits == answered
        assert srv.calls == len(srv.bodies) == 200  # no request was sent twice


def test_rate_limit_spaces_requests():
    import time

    with LoopbackServer() as srv:
        backend = OpenAIBackend("m", base_url=srv.base_url, concurrency=8, rpm=600)  # 10 per second
        t = time.perf_counter()
        backend.complete([ChatRequest((("user", f"q{i}"),)) for i in range(25)])
        elapsed = time.perf_counter() - t
        assert srv.calls == 25
    assert 1.4 <= elapsed < 6  # a 10-request burst, then 10 per second


def test_missing_api_key_is_a_clear_error(monkeypatch):
    from kame_data.llm.service_errors import BackendConfigError

    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(BackendConfigError, match="MY_KEY"):
        OpenAIBackend("gpt-4.1-nano", api_key_env="MY_KEY")


def test_cached_backend_dedupes_within_a_batch(tmp_path):
    with LoopbackServer() as srv:
        b = CachedBackend(OpenAIBackend("m", base_url=srv.base_url), RequestCache(tmp_path / "x.sqlite"))
        reqs = [ChatRequest((("user", "same"),))] * 5 + [ChatRequest((("user", "other"),))]
        res = b.complete(reqs)
        assert srv.calls == 2 and len({r.text for r in res[:5]}) == 1


def test_batches_running_at_once_send_a_shared_request_once(tmp_path):
    """Two batches that share requests, sent at the same time from two threads (as the oracle step's
    concurrent batches do): each distinct request reaches the server once; the later batch waits for
    the answer instead of paying for it again."""
    import threading

    shared = [ChatRequest((("user", f"shared {i}"),)) for i in range(10)]
    a = shared + [ChatRequest((("user", f"only a {i}"),)) for i in range(5)]
    b = [ChatRequest((("user", f"only b {i}"),)) for i in range(5)] + shared[::-1]
    with LoopbackServer(latency=0.2) as srv:
        backend = CachedBackend(OpenAIBackend("m", base_url=srv.base_url, concurrency=32),
                                RequestCache(tmp_path / "x.sqlite"))
        out = {}
        threads = [threading.Thread(target=lambda n, r: out.__setitem__(n, backend.complete(r)), args=(n, r))
                   for n, r in (("a", a), ("b", b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert srv.calls == len(srv.bodies) == 20
    assert [r.text for r in out["a"][:10]] == [r.text for r in out["b"][5:][::-1]]
    assert backend.calls == 20 and backend.calls + backend.cache_hits == 30


def test_one_meter_for_every_llm_call_of_a_run(tmp_path):
    """The runner's steps draw on one meter: script rewrites spend the same budget as the oracle,
    each at its own prices, and the manifest's `llm_usage` adds both stages up."""
    import yaml

    from kame_data.recipe import SourceSpec, load_recipe
    from kame_data.runner.config import RunConfig
    from kame_data.runner.manifest import llm_usage
    from kame_data.sources import load_source
    from tests.conftest import FIXTURES

    with LoopbackServer() as srv:
        backend = {"kind": "openai", "model": "m", "base_url": srv.base_url}
        raw = {"name": "meter", "sources": [{"kind": "gsm8k", "path": "x.jsonl"}],
               "script": {"style": "llm", "llm": {"backend": {**backend, "prompt_price_per_million": 100.0}}},
               "oracle": {"budget_usd": 1.5, "backend": {**backend, "completion_price_per_million": 2000.0}}}
        (tmp_path / "r.yaml").write_text(yaml.safe_dump(raw))
        config = RunConfig.resolve(load_recipe(tmp_path / "r.yaml"))
        script, *_, oracle = config.build_steps()
        items = [r for r in load_source(SourceSpec(kind="gsm8k", path=str(FIXTURES / "gsm8k_test_200.jsonl"),
                                                   limit=3))]
        script.setup()
        script.run(items)  # the loopback's replies are no rewrite: template fallbacks, but paid for
        script_spend = script.context.meter.spent_usd()  # the run's meter, which the runner gave both steps
        oracle.setup()
        assert oracle.meter.meter is script.context.meter is script.backend.inner.meter.meter and 0 < script_spend < 1.5
        with pytest.raises(BudgetExceeded):
            oracle.run([synthetic_dialogue(i) for i in range(40)])
        summaries = {"script": script.summary(), "oracle": oracle.summary()}
        oracle.teardown()
    worst = 48 * 2000.0 / 1e6  # an oracle request's worst case: its max_tokens at the completion price
    # the oracle had what the script left: it stopped within it, and only when one more did not fit
    assert 1.5 - script_spend - worst < oracle.meter.cost_usd <= 1.5 - script_spend
    usage = llm_usage(1.5, summaries)
    assert usage["stages"]["script"]["cost_usd"] == pytest.approx(script_spend, abs=1e-6)
    assert usage["stages"]["script"]["completion_tokens"] > 0 and usage["stages"]["oracle"]["prompt_tokens"] > 0
    assert usage["cost_usd"] <= 1.5 and usage["budget_usd"] == 1.5
    assert usage["cost_usd"] == pytest.approx(oracle.meter.meter.spent_usd(), abs=1e-6)


def test_oracle_seed_draws_other_samples_of_the_same_requests():
    """`oracle.seed` changes only the sampling seed of each request (1000 * seed + attempt): the same
    prompts go out, so a draw compares with another on the same ladders."""
    r = synthetic_dialogue(2)
    sent: dict[int, list[dict]] = {0: [], 3: []}
    for seed in sent:
        def record(body, seen, headers, mine=sent[seed]):
            mine.append(body)  # and the usual reply
        with LoopbackServer(override=record) as srv:
            st = OracleStage(OracleConfig(seed=seed, backend=BackendConfig(kind="openai", model="m",
                                                                           base_url=srv.base_url)))
            st.setup()
            assert isinstance(run_flat(st, [r])[0], Sample)
    prompts = lambda bodies: sorted(str(b["messages"]) for b in bodies)  # noqa: E731
    assert prompts(sent[0]) == prompts(sent[3]) and sent[0]
    assert {b["seed"] // 1000 for b in sent[0]} == {0} and {b["seed"] // 1000 for b in sent[3]} == {3}

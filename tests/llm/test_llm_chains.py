"""Chains of requests through the cache: a stateful backend's answer depends on the requests before
it in its chain, so the cache keys carry that history and a chain with a miss is sent whole."""

from kame_data.llm.base import Capabilities, ChatBackend, ChatRequest, ChatResult
from kame_data.llm.cache import CachedBackend, RequestCache


class HistoryBackend(ChatBackend):
    """Answers like a model whose KV cache holds the chain so far: each answer names its history."""

    name, model = "history", "h1"
    capabilities = Capabilities(chains=True)

    def __init__(self):
        self.sent: list[list[str]] = []

    def complete_chains(self, chains):
        self.sent += [[r.messages[-1][1] for r in chain] for chain in chains]
        return [[ChatResult(f"{r.messages[-1][1]} after {'+'.join(x.messages[-1][1] for x in chain[:i]) or 'nothing'}")
                 for i, r in enumerate(chain)] for chain in chains]

    def complete(self, requests, on_answer=None):
        return [c[0] for c in self.complete_chains([[r] for r in requests])]


def req(text: str, seed: int = 0) -> ChatRequest:
    return ChatRequest((("system", "s"), ("user", text)), seed=seed)


def test_a_rerun_gets_every_answer_from_the_cache(tmp_path):
    chains = [[req("a"), req("b"), req("c")], [req("x"), req("y")]]
    first = CachedBackend(HistoryBackend(), RequestCache(tmp_path / "c.sqlite"))
    out = first.complete_chains(chains)
    assert [r.text for r in out[0]] == ["a after nothing", "b after a", "c after a+b"]
    assert first.calls == 5
    again = CachedBackend(HistoryBackend(), RequestCache(tmp_path / "c.sqlite"))
    assert again.complete_chains(chains) == [[r.__class__(r.text, cached=True) for r in c] for c in out]
    assert again.calls == 0 and again.cache_hits == 5 and again.inner.sent == []


def test_an_answer_is_never_reused_after_another_history(tmp_path):
    b = CachedBackend(HistoryBackend(), RequestCache(tmp_path / "c.sqlite"))
    b.complete_chains([[req("a"), req("b")]])
    out = b.complete_chains([[req("z"), req("b")]])  # "b" again, but after "z"
    assert out[0][1].text == "b after z"
    assert b.inner.sent == [["a", "b"], ["z", "b"]]


def test_a_chain_with_one_miss_is_sent_whole(tmp_path):
    b = CachedBackend(HistoryBackend(), RequestCache(tmp_path / "c.sqlite"))
    b.complete_chains([[req("a"), req("b")]])  # e.g. a run killed after the first two steps
    out = b.complete_chains([[req("a"), req("b"), req("c")]])
    assert b.inner.sent[-1] == ["a", "b", "c"]  # the history the missing answer needs is rebuilt
    assert [r.text for r in out[0]] == ["a after nothing", "b after a", "c after a+b"]


def test_repeats_in_a_chain_are_asked_once(tmp_path):
    b = CachedBackend(HistoryBackend(), RequestCache(tmp_path / "c.sqlite"))
    out = b.complete_chains([[req("a"), req("a"), req("b"), req("a")]])
    assert b.inner.sent == [["a", "b"]]
    assert [r.text for r in out[0]] == ["a after nothing", "a after nothing", "b after a", "a after nothing"]


def test_a_chain_of_one_shares_the_plain_key(tmp_path):
    b = CachedBackend(HistoryBackend(), RequestCache(tmp_path / "c.sqlite"))
    b.complete([req("q")])
    b.complete_chains([[req("q")]])
    assert b.inner.sent == [["q"]] and b.cache_hits == 1


class Stateless(ChatBackend):
    name, model = "plain", "p"

    def __init__(self):
        self.batches = []

    def complete(self, requests, on_answer=None):
        self.batches.append(len(requests))
        return [ChatResult(r.messages[-1][1].upper()) for r in requests]


def test_stateless_backends_get_one_flat_batch(tmp_path):
    chains = [[req("a"), req("b")], [req("c")]]
    inner = Stateless()
    assert [[r.text for r in c] for c in inner.complete_chains(chains)] == [["A", "B"], ["C"]]
    assert inner.batches == [3]
    cached = CachedBackend(Stateless(), RequestCache(tmp_path / "c.sqlite"))
    assert [[r.text for r in c] for c in cached.complete_chains(chains)] == [["A", "B"], ["C"]]
    assert cached.inner.batches == [3]


def test_instances_default_to_one_single_threaded_instance_per_core(monkeypatch):
    from kame_data.llm import llamacpp

    monkeypatch.setattr(llamacpp, "cores", lambda: 8)
    assert llamacpp.plan_instances(None, None) == (8, 1)
    assert llamacpp.plan_instances(None, 2) == (4, 2)
    assert llamacpp.plan_instances(1, None) == (1, 8)
    assert llamacpp.plan_instances(3, 2) == (3, 2)


def test_plain_layout_for_models_without_a_chat_template():
    from kame_data.llm.llama_worker import plain_layout

    msgs = (("system", "Be brief."), ("user", "Q1"), ("assistant", "A1"), ("user", "Q2"))
    text = plain_layout(msgs, open_reply=True)
    assert text == "Be brief.\n\nInput:\nQ1\nReply: A1\n\nInput:\nQ2\nReply:"
    assert text.startswith(plain_layout(msgs[:-1], open_reply=False))  # the shared part is a prefix

"""Batched embedded decoding (llm/llama_batch.py): several chains in one llama.cpp batch give exactly
the answers of one chain at a time, on the real embedded model and real oracle prompts; a build
whose batched answers differ is caught when the model loads and decodes one chain at a time."""

import pytest

from kame_data.llm import llama_worker
from kame_data.llm.llama_batch import BatchedDecoder
from kame_data.llm.llamacpp import LlamaCppBackend, deal, embedded_model_path
from kame_data.oracle.ladder import ladder
from kame_data.oracle.prompts import build_request
from kame_data.records import CHANNEL
from tests.synthetic import fixture_dialogues


def oracle_chains(dialogues: int, steps: int) -> list:
    out = []
    for r in fixture_dialogues(dialogues):
        ladder_steps = [s for s in ladder(r.words, 0.5, CHANNEL["A"], CHANNEL) if s.level < 5]
        chain = list(dict.fromkeys(build_request(s, 16, 0.7, seed=0) for s in ladder_steps))
        out.append(chain[: steps + len(out)])  # chains of different lengths
    return out


def test_deal_balances_requests_and_keeps_every_chain():
    tasks = deal(5, [9, 1, 5, 4, 3], 2)
    assert sorted(i for t in tasks for i in t) == [0, 1, 2, 3, 4]
    assert sorted(sum([9, 1, 5, 4, 3][i] for i in t) for t in tasks) == [10, 12]  # longest first, to the lighter
    assert deal(1, [3], 4) == [[0]]


@pytest.mark.slow
def test_batched_answers_are_the_one_at_a_time_answers():
    chains = oracle_chains(3, 5)
    one = LlamaCppBackend(instances=1, sequences=1)
    try:
        alone = one.complete_chains(chains)
    finally:
        one.close()
    batched = LlamaCppBackend(instances=1, sequences=4)
    try:
        assert batched.batch_note == ""  # the load-time check passed on this build
        together = batched.complete_chains(chains)
    finally:
        batched.close()
    assert together == alone
    assert all(r.text and not r.error for chain in together for r in chain)


@pytest.mark.slow
def test_a_batched_context_with_other_kernels_is_caught_at_load(monkeypatch):
    """Llama's context turns flash attention off; llama.cpp's default context leaves it to the
    build (on here), so a batched context built from the defaults computes other floats. The
    load-time check must see the changed answers and leave batching off."""
    import llama_cpp

    monkeypatch.setattr(BatchedDecoder, "_base_params", staticmethod(lambda llm: llama_cpp.llama_context_default_params()))
    for name in ("_LLM", "_FORMAT", "_START", "_BATCHED", "_BATCH_NOTE", "_LOAD_ERROR"):
        monkeypatch.setattr(llama_worker, name, getattr(llama_worker, name))
    llama_worker.load(str(embedded_model_path()), 2048, 1, sequences=4)
    assert llama_worker.ready() == ""
    assert llama_worker._BATCHED is None
    assert llama_worker.batch_note().startswith("batched decoding off: on this build and CPU it answered")
    chains = llama_worker._check_chains()
    assert llama_worker.complete_chains(chains) == [llama_worker.complete_chain(c) for c in chains]


@pytest.mark.slow
def test_the_shared_messages_are_evaluated_once_per_call_not_once_per_sequence(monkeypatch):
    """Each chain starts from a copy of the template stream's KV (the few-shot prompt, ~360
    tokens): decoded once for all sequences, with the answers of one chain at a time."""
    for name in ("_LLM", "_FORMAT", "_START", "_BATCHED", "_BATCH_NOTE", "_LOAD_ERROR"):
        monkeypatch.setattr(llama_worker, name, getattr(llama_worker, name))
    llama_worker.load(str(embedded_model_path()), 2048, 1, sequences=1)
    chains = [chain[:2] for chain in oracle_chains(3, 2)]
    alone = [llama_worker.complete_chain(c) for c in chains]
    decoder = BatchedDecoder(llama_worker._LLM, 3, 2048, 1)
    decoded = []
    real = decoder._decode
    monkeypatch.setattr(decoder, "_decode", lambda steps: decoded.extend(len(t) for _, (t, _) in steps) or real(steps))
    try:
        together = decoder.complete_chains(chains, llama_worker._tokenize)
    finally:
        decoder.close()
    assert together == alone
    prompts = [llama_worker._tokenize(r) for chain in chains for r in chain]
    shared = prompts[0][1]
    assert shared > 200 and all(p[1] == shared for p in prompts)
    # the shared messages once; then each request's own tokens and its answer's
    own = sum(len(p) - shared for p, _ in prompts) + sum(r.completion_tokens for c in together for r in c)
    assert shared <= sum(decoded) <= shared + own, (sum(decoded), shared, own)

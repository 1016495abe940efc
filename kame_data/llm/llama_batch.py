"""Several chains decoded together in one llama.cpp context: one sequence per chain, each in its
own KV stream (`kv_unified` off), their tokens sent to the model in shared batches.

Why: a 135M model decoding one sequence spends most of each step reading its weights and in
Python around the call; a batch of several sequences' next tokens reads the weights once. The
answers must not depend on which chains ran beside each other (`llama_worker` starts every chain
from the same state for the same reason), so:
  - each sequence has its own KV stream, laid out as if it ran alone (attention never sums over
    another chain's cells);
  - every chain starts from the shared messages evaluated alone, copied into its sequence
    (`llama_memory_seq_cp`: the same values, not a recomputation);
  - each request samples with its own sampler chain, seeded by the request.
Whether the build's kernels give a row the same numbers in any batch is checked when the model
loads (`batch_invariant`), and the worker falls back to one sequence at a time where they do not.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

from kame_data.llm.base import ChatRequest, ChatResult

# llama-cpp-python's completion defaults, which the one-sequence path samples with
TOP_K, TOP_P, MIN_P = 40, 0.95, 0.05
PREFIX_SEQ = 0  # the sequence that holds the shared messages evaluated alone


@dataclass
class _Slot:
    """One sequence: the chain it answers, and where it is in it."""

    seq: int
    held: list[int] = field(default_factory=list)  # tokens whose KV the sequence holds
    chain: int = -1
    step: int = 0
    pending: list[int] = field(default_factory=list)  # tokens to evaluate before sampling
    out: list[int] = field(default_factory=list)  # tokens generated for the current request
    text: bytes = b""
    sampler: object = None
    prompt_tokens: int = 0


class BatchDecoder:
    """Answers chains of requests, `sequences` of them at a time, in one context."""

    def __init__(self, llm, sequences: int, n_ctx: int, threads: int, stop: tuple[str, ...],
                 tokens_of, refuse):
        import llama_cpp as L

        self.L, self.llm, self.stop = L, llm, stop
        self.tokens_of, self.refuse = tokens_of, refuse
        self.sequences = max(1, sequences)
        p = L.llama_context_default_params()
        # sequence 0 holds the shared prefix; 1..n answer chains
        p.n_seq_max = self.sequences + 1
        p.n_ctx = n_ctx * (self.sequences + 1)
        p.n_batch = p.n_ubatch = 512
        p.n_threads = p.n_threads_batch = threads
        p.kv_unified = False
        p.no_perf = True
        self.n_ctx = n_ctx
        self.ctx = L.llama_init_from_model(llm._model.model, p)
        if not self.ctx:
            raise RuntimeError("llama.cpp could not create a context for batched decoding")
        self.mem = L.llama_get_memory(self.ctx)
        self.vocab = L.llama_model_get_vocab(llm._model.model)
        self.batch = L.llama_batch_init(p.n_batch, 0, 1)
        self.n_batch = p.n_batch
        self.prefix: list[int] = []

    def close(self) -> None:
        L = self.L
        if self.ctx:
            L.llama_batch_free(self.batch)
            L.llama_free(self.ctx)
            self.ctx = None

    # -- the shared prefix ---------------------------------------------------------------------
    def _decode(self, items: list[tuple[int, int, int, bool]]) -> None:
        """One llama_decode of (token, pos, seq, wants_logits) items."""
        b = self.batch
        for i, (tok, pos, seq, logits) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i] = tok, pos, 1
            b.seq_id[i][0] = seq
            b.logits[i] = logits
        b.n_tokens = len(items)
        rc = self.L.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")

    def _set_prefix(self, prefix: list[int]) -> None:
        if prefix == self.prefix:
            return
        self.L.llama_memory_seq_rm(self.mem, PREFIX_SEQ, 0, -1)
        for at in range(0, len(prefix), self.n_batch):
            chunk = prefix[at: at + self.n_batch]
            self._decode([(t, at + i, PREFIX_SEQ, False) for i, t in enumerate(chunk)])
        self.prefix = list(prefix)

    # -- chains --------------------------------------------------------------------------------
    def complete_chains(self, chains: list[list[ChatRequest]]) -> list[list[ChatResult]]:
        results: list[list[ChatResult | None]] = [[None] * len(c) for c in chains]
        prompts = [[self.tokens_of(r.messages, r.reply_start) for r in c] for c in chains]
        todo = [i for i in sorted(range(len(chains)), key=lambda i: -len(chains[i])) if chains[i]]
        slots = [_Slot(seq=s + 1) for s in range(self.sequences)]
        # chains grouped by their shared prefix (every oracle chain has the same one)
        while todo or any(s.chain >= 0 for s in slots):
            for s in slots:
                if s.chain < 0 and todo:
                    prefix = prompts[todo[0]][0][0][: prompts[todo[0]][0][1]]
                    if prefix != self.prefix and any(o.chain >= 0 for o in slots):
                        break  # a new prefix waits until the chains on the old one are done
                    self._set_prefix(prefix)
                    self._start_chain(s, todo.pop(0), chains, prompts, results)
            self._step(slots, chains, prompts, results)
        return results  # type: ignore[return-value]

    def _start_chain(self, s: _Slot, chain: int, chains, prompts, results) -> None:
        L = self.L
        L.llama_memory_seq_rm(self.mem, s.seq, 0, -1)
        if self.prefix:
            L.llama_memory_seq_cp(self.mem, PREFIX_SEQ, s.seq, -1, -1)  # whole: across streams only
        s.held, s.chain, s.step = list(self.prefix), chain, 0
        self._start_request(s, chains, prompts, results)

    def _start_request(self, s: _Slot, chains, prompts, results) -> None:
        """Point the slot at its chain's next request, or free it at the chain's end."""
        L = self.L
        while s.step < len(chains[s.chain]):
            req = chains[s.chain][s.step]
            prompt = prompts[s.chain][s.step][0]
            if len(prompt) + req.max_tokens > self.n_ctx:
                results[s.chain][s.step] = self.refuse(req, prompt)
                s.step += 1
                continue
            keep = 0
            limit = min(len(s.held), len(prompt) - 1)  # the last prompt token is always evaluated
            while keep < limit and s.held[keep] == prompt[keep]:
                keep += 1
            L.llama_memory_seq_rm(self.mem, s.seq, keep, -1)
            s.held = s.held[:keep]
            s.pending, s.out, s.text, s.prompt_tokens = prompt[keep:], [], b"", len(prompt)
            s.sampler = self._sampler(req)
            return
        s.chain = -1

    def _sampler(self, req: ChatRequest):
        L = self.L
        chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
        if req.temperature <= 0:
            L.llama_sampler_chain_add(chain, L.llama_sampler_init_greedy())
            return chain
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_top_k(TOP_K))
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_top_p(TOP_P, 1))
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_min_p(MIN_P, 1))
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_temp(req.temperature))
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_dist(req.seed & 0xFFFFFFFF))
        return chain

    def _step(self, slots: list[_Slot], chains, prompts, results) -> None:
        """One decode: every busy slot's pending tokens (its prompt, or its last sampled token),
        then a sample for each slot whose prompt is all in."""
        items: list[tuple[int, int, int, bool]] = []
        owners: list[tuple[_Slot, int]] = []
        room = self.n_batch
        for s in slots:
            if s.chain < 0 or not s.pending or room <= 0:
                continue
            take = s.pending[:room]
            done = len(take) == len(s.pending)
            base = len(s.held)
            for i, t in enumerate(take):
                items.append((t, base + i, s.seq, done and i == len(take) - 1))
            s.held.extend(take)
            s.pending = s.pending[len(take):]
            room -= len(take)
            if done:
                owners.append((s, len(items) - 1))
        if not items:
            return
        self._decode(items)
        L = self.L
        for s, idx in owners:
            req = chains[s.chain][s.step]
            tok = L.llama_sampler_sample(s.sampler, self.ctx, idx)
            finished = bool(L.llama_vocab_is_eog(self.vocab, tok))
            if not finished:
                s.out.append(tok)
                s.text += self._piece(tok)
                finished = any(x.encode() in s.text for x in self.stop) or len(s.out) >= req.max_tokens
                if not finished:
                    s.pending = [tok]
            if finished:
                results[s.chain][s.step] = self._result(s, req)
                L.llama_sampler_free(s.sampler)
                s.sampler = None
                # the last sampled token was never evaluated: the KV holds the prompt and the rest
                s.step += 1
                self._start_request(s, chains, prompts, results)

    def _piece(self, tok: int) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = self.L.llama_token_to_piece(self.vocab, tok, buf, len(buf), 0, False)
        return buf.raw[:n] if n > 0 else b""

    def _result(self, s: _Slot, req: ChatRequest) -> ChatResult:
        text = s.text.decode("utf-8", errors="ignore")
        for x in self.stop:
            cut = text.find(x)
            if cut >= 0:
                text = text[:cut]
        if req.reply_start:
            text = req.reply_start + text
        return ChatResult(text=text, prompt_tokens=s.prompt_tokens, completion_tokens=len(s.out))

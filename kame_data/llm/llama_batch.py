"""Several chains decoded together in one llama.cpp context: one sequence id per chain, one
`llama_decode` per step for all of them (docs/design.md, "The embedded simulator").

Why: a 135M model decoding one token reads every weight for one row of activations; decoding the
next token of eight chains at once reads them once for eight rows. Where the decode is bound by
arithmetic instead (a 2-core AVX2 CPU with Q4_1 or Q8_0 weights), it gains little: see docs/design.md.

Same answers: each chain replays exactly what `llama_worker.complete_chain` does with one sequence
(`Llama.create_completion` on a KV cache that keeps the previous prompt): the shared messages
evaluated alone from an empty sequence (once per call, in a template stream whose KV each chain's
sequence copies: the same floats, without paying the few-shot prompt once per sequence), then each
prompt's new tokens in chunks of `n_batch`, from the longest prefix the sequence already holds;
then tokens sampled by the same sampler chain with the request's seed, stopped at EOS, at a
newline, or at max_tokens. The context keeps one KV stream per sequence (`kv_unified = False`) and
a prompt chunk is decoded alone, so a sequence's floats do not depend on which other sequences
share a step. Whether that holds on this build and CPU is checked when the worker loads
(`llama_worker.load`): if any answer differs from the one-sequence path, the worker decodes one
chain at a time as before.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Generator

from kame_data.llm.base import REFUSED, ChatRequest, ChatResult

# One step of a chain: the tokens to evaluate next, whether it needs the logits of the last one;
# the driver sends back that row's index in the decoded batch (-1 when no logits were asked).
Step = tuple[list[int], bool]
Tokenize = Callable[[ChatRequest], tuple[list[int], int]]


@dataclass
class _Sequence:
    """What one sequence id of the context holds: the tokens in its KV, and the shared-prefix
    state `llama_worker._start_from` keeps for the one-sequence path."""

    seq: int
    tokens: list[int] = field(default_factory=list)
    start: tuple[int, ...] | None = None


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens two token lists share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class BatchedDecoder:
    """Up to `slots` chains at a time in one context (see the module doc)."""

    def __init__(self, llm, slots: int, n_ctx: int, threads: int):
        import llama_cpp
        from llama_cpp import _internals

        self.llm, self.n_ctx = llm, n_ctx
        self.n_batch = llm.n_batch
        params = self._base_params(llm)
        params.n_ctx = n_ctx * (slots + 1)  # one stream of n_ctx per sequence, and the template's
        params.n_batch = params.n_ubatch = self.n_batch  # a step is never split behind our back
        params.n_seq_max = slots + 1
        params.kv_unified = False
        params.n_threads = params.n_threads_batch = threads
        self._llama_cpp = llama_cpp
        self.ctx = _internals.LlamaContext(model=llm._model, params=params, verbose=False)
        self.memory = llama_cpp.llama_get_memory(self.ctx.ctx)
        self.batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        self.sequences = [_Sequence(i) for i in range(slots)]
        self.template = _Sequence(slots)  # the shared messages evaluated alone, copied to each chain's start

    @staticmethod
    def _base_params(llm):
        """The one-sequence context's own parameters (flash attention and all): the same kernels."""
        import llama_cpp

        return llama_cpp.llama_context_params.from_buffer_copy(llm.context_params)

    def close(self) -> None:
        if self.batch is not None:
            self._llama_cpp.llama_batch_free(self.batch)
            self.batch = None
        self.ctx.close()

    # --- one chain, as the one-sequence path runs it ----------------------------------------

    def _forget(self, s: _Sequence, keep: int) -> None:
        self._llama_cpp.llama_memory_seq_rm(self.memory, s.seq, keep, -1)
        del s.tokens[keep:]

    def _evaluate(self, s: _Sequence, tokens: list[int]) -> Generator[Step, int, int]:
        """Evaluate tokens in chunks of n_batch, as `Llama.eval` does; the last row's index."""
        row = -1
        for i in range(0, len(tokens), self.n_batch):
            chunk = tokens[i: i + self.n_batch]
            row = yield chunk, i + self.n_batch >= len(tokens)
            s.tokens.extend(chunk)
        return row

    def _chain(self, chain: list[ChatRequest], s: _Sequence, tokenize: Tokenize) -> Generator[Step, int, list]:
        out = []
        for i, req in enumerate(chain):
            prompt, shared = tokenize(req)
            if i == 0:  # the shared messages' canonical state (llama_worker._start_from)
                prefix = tuple(prompt[:shared])
                if s.start == prefix and len(s.tokens) >= len(prefix):
                    del s.tokens[len(prefix):]  # its KV goes with the next evaluation's cut
                else:
                    self._forget(s, 0)
                    if prefix and self.template.start == prefix:  # the same floats, copied
                        self._llama_cpp.llama_memory_seq_cp(self.memory, self.template.seq, s.seq, -1, -1)
                        s.tokens = list(prefix)
                    elif prefix:
                        yield from self._evaluate(s, list(prefix))
                    s.start = prefix
            elif s.start is not None and tuple(prompt[: len(s.start)]) != s.start:
                s.start = None
            out.append((yield from self._answer(req, prompt, s)))
        return out

    def _answer(self, req: ChatRequest, prompt: list[int], s: _Sequence) -> Generator[Step, int, ChatResult]:
        llm = self.llm
        if len(prompt) + req.max_tokens > self.n_ctx:
            return ChatResult(text="", error=REFUSED, refusal=f"prompt of {len(prompt)} tokens and {req.max_tokens} "
                                                              f"to answer do not fit the context ({self.n_ctx}; raise "
                                                              "oracle.backend.n_ctx)")
        max_tokens = req.max_tokens if req.max_tokens + len(prompt) < self.n_ctx else self.n_ctx - len(prompt)
        # Llama.generate: reuse the longest prefix held; a prompt held whole re-evaluates its last token
        held = common_prefix(s.tokens, prompt)
        reuse = held - 1 if held == len(prompt) else held
        self._forget(s, max(reuse, 0))
        row = yield from self._evaluate(s, prompt[max(reuse, 0):])
        llm.set_seed(req.seed)
        sampler = llm._init_sampler(temp=req.temperature)  # create_completion's defaults, this request's seed
        completion: list[int] = []
        eog = self._llama_cpp.llama_vocab_is_eog
        while True:
            token = sampler.sample(self.ctx, row)
            if eog(llm._model.vocab, token):
                text = llm.detokenize(completion, prev_tokens=prompt)
                break
            completion.append(token)
            text = llm.detokenize(completion, prev_tokens=prompt)
            if b"\n" in text:  # llama_worker.STOP
                text = text[: text.index(b"\n")]
                break
            if len(completion) >= max_tokens:
                break
            row = yield from self._evaluate(s, [token])
        answer = text.decode("utf-8", errors="ignore")
        return ChatResult(text=req.reply_start + answer if req.reply_start else answer,
                          prompt_tokens=len(prompt), completion_tokens=len(completion))

    # --- the driver: every waiting chain's next step in one decode ---------------------------

    def _fill_template(self, prefix: tuple[int, ...]) -> None:
        """The template stream holds `prefix` evaluated alone from empty, in chunks of n_batch (as
        `_evaluate` would on a chain's own sequence), so a chain starts from a copy of its KV instead
        of evaluating the shared messages again. Filled between calls only: a copy is carried out at
        the next decode, and every chain decodes after its copy, so none is pending here."""
        t = self.template
        if t.start == prefix:
            return
        self._forget(t, 0)
        t.start = None
        steps = self._evaluate(t, list(prefix))
        try:
            step = next(steps)
            while True:  # each chunk decoded alone, now: no chain is running between calls
                self._decode([(t, step)])
                step = steps.send(-1)
        except StopIteration:
            t.start = prefix

    def complete_chains(self, chains: list[list[ChatRequest]], tokenize: Tokenize) -> list[list[ChatResult]]:
        """Answers per chain; chains wait for a free sequence in the order given."""
        if chains and chains[0]:
            prompt, shared = tokenize(chains[0][0])
            if shared:
                self._fill_template(tuple(prompt[:shared]))
        results: list[list[ChatResult] | None] = [None] * len(chains)
        waiting = deque(range(len(chains)))
        running: dict[int, tuple[int, Generator, Step]] = {}  # seq -> (chain index, its steps, next step)

        def advance(seq: int, index: int, steps: Generator, row: int | None) -> None:
            try:
                step = next(steps) if row is None else steps.send(row)
            except StopIteration as done:
                results[index] = done.value
                running.pop(seq, None)
                return
            running[seq] = (index, steps, step)

        while waiting or running:
            for s in self.sequences:
                while s.seq not in running and waiting:
                    index = waiting.popleft()
                    advance(s.seq, index, self._chain(chains[index], s, tokenize), None)
            if not running:
                continue
            # A prompt chunk goes alone: llama.cpp splits a step whose sequences bring different
            # numbers of tokens, and where it splits would depend on the neighbours. Then every
            # sequence's next token together (at most `slots` <= n_batch tokens).
            chunks = [seq for seq in sorted(running) if len(running[seq][2][0]) > 1]
            taken = chunks[:1] or sorted(running)
            rows = self._decode([(self.sequences[seq], running[seq][2]) for seq in taken])
            for seq in taken:
                index, steps, _ = running[seq]
                advance(seq, index, steps, rows[seq])
        return results  # type: ignore[return-value]

    def _decode(self, steps: list[tuple[_Sequence, Step]]) -> dict[int, int]:
        """One llama_decode of each sequence's step; the logits row of each sequence id."""
        b, at, rows = self.batch, 0, {}
        for s, (tokens, logits) in steps:
            seq, start = s.seq, len(s.tokens)
            for k, t in enumerate(tokens):
                b.token[at] = t
                b.pos[at] = start + k
                b.n_seq_id[at] = 1
                b.seq_id[at][0] = seq
                b.logits[at] = logits and k == len(tokens) - 1
                at += 1
            rows[seq] = at - 1 if logits else -1
        b.n_tokens = at
        rc = self._llama_cpp.llama_decode(self.ctx.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed ({rc}) on a step of {at} tokens")
        return rows

"""What runs inside an embedded-model worker process: one llama.cpp model, and chains of requests.

Speed: llama.cpp keeps the KV cache of the previous prompt, so a prompt that shares a prefix with
the one before it only evaluates its new tokens. The oracle's requests are sent as chains (one
dialogue's steps in time order: each prompt is the previous one plus a few words), and the leading
messages every request shares (system text, few-shot examples) are evaluated once per process.

Determinism: floats depend on how tokens were split into evaluation batches, so reusing a KV
prefix left behind by an *unrelated* prompt could change an answer. Every chain therefore starts
from the same state, the shared messages evaluated alone from an empty cache; a chain's answers
then depend only on the chain, never on which process ran it or what ran before.

Batching: a worker given several chains at once decodes them together, one sequence id each
(`llama_batch.BatchedDecoder`), when a check at load time shows that this build and CPU give the
batched path exactly the one-sequence answers; otherwise it answers them one after another.

Models without a chat template (base models such as Gemma 3 270M) get a plain few-shot layout.
"""

from __future__ import annotations

from kame_data.llm.base import REFUSED, ChatRequest, ChatResult
from kame_data.llm.llama_batch import common_prefix

_LLM = None
_LOAD_ERROR = ""
_FORMAT = None  # a Jinja2ChatFormatter for chat models, None for the plain layout
_START: tuple[int, ...] | None = None  # the tokens whose KV the cache holds as evaluated alone
_BATCHED = None  # a llama_batch.BatchedDecoder when batching passed its check, else None
_BATCH_NOTE = ""  # why batching is off (empty when on, or when one sequence was asked for)

STOP = ("\n",)  # a spoken reply is one line: what follows a newline is another turn (or noise)


def load(path: str, n_ctx: int, threads: int, sequences: int = 1) -> None:
    """Load the model; with `sequences` > 1, also the batched decoder, kept only if it passes
    `_batch_check`."""
    global _LLM, _LOAD_ERROR, _FORMAT
    try:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        _LLM = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads, verbose=False,
                     seed=0)
        template = _LLM.metadata.get("tokenizer.chat_template")
        if template:
            model = _LLM._model
            eos, bos = model.token_eos(), model.token_bos()
            _FORMAT = Jinja2ChatFormatter(template, model.token_get_text(eos) if eos != -1 else "",
                                          model.token_get_text(bos) if bos != -1 else "")
    except Exception as e:  # reported to the parent by the readiness probe
        _LOAD_ERROR = f"{type(e).__name__}: {e}"
        return
    if sequences > 1:
        _load_batched(n_ctx, threads, sequences)


def _load_batched(n_ctx: int, threads: int, sequences: int) -> None:
    global _BATCHED, _BATCH_NOTE
    from kame_data.llm.llama_batch import BatchedDecoder

    try:
        decoder = BatchedDecoder(_LLM, sequences, n_ctx, threads)
    except Exception as e:  # an older build without per-sequence KV streams, or too little memory
        _BATCH_NOTE = f"batched decoding unavailable ({type(e).__name__}: {e})"
        return
    differs = _batch_check(decoder)
    if differs:
        decoder.close()
        _BATCH_NOTE = f"batched decoding off: {differs}"
        return
    _BATCHED = decoder


# Chains of different lengths, decoded alone and then together at load time (`_batch_check`).
_CHECK_TURNS = ("What is the boiling point of water at sea level",
                "Name three primary colors and say which one",
                "My neighbour's dog barks every night and I",
                "Explain in one sentence why the sky looks blue on a clear")


def _check_chains() -> list[list[ChatRequest]]:
    system = ("system", "You answer the user in one short spoken sentence.")
    chains = []
    for n, turn in enumerate(_CHECK_TURNS):
        words = turn.split()
        cuts = range(len(words) - n, len(words) + 1, 2)
        chains.append([ChatRequest((system, ("user", " ".join(words[:k]))), max_tokens=12, temperature=0.7, seed=k)
                       for k in cuts])
    return chains


def _batch_check(decoder) -> str:
    """'' when the batched decoder answers the check chains exactly as the one-sequence path does."""
    chains = _check_chains()
    alone = [complete_chain(chain) for chain in chains]
    together = decoder.complete_chains(chains, _tokenize)
    for a, b in zip(alone, together):
        for x, y in zip(a, b):
            if x != y:
                return f"on this build and CPU it answered {y.text!r} where one sequence answers {x.text!r}"
    return ""


def batch_note() -> str:
    return _BATCH_NOTE


def _tokenize(req: ChatRequest) -> tuple[list[int], int]:
    return tokens_of(req.messages, req.reply_start)


def ready() -> str:
    return _LOAD_ERROR if _LLM is None else ""


def plain_layout(messages: tuple[tuple[str, str], ...], open_reply: bool) -> str:
    """System text, then `Input:` / `Reply:` pairs; ends with an open `Reply:` when asked to."""
    parts = []
    for role, content in messages:
        if role == "system":
            parts.append(f"{content}\n\n")
        elif role == "user":
            parts.append(f"Input:\n{content}\n")
        else:
            parts.append(f"Reply: {content}\n\n")
    if open_reply:
        parts.append("Reply:")
    return "".join(parts)


def _text(messages: tuple[tuple[str, str], ...], open_reply: bool) -> tuple[str, bool]:
    """The prompt text, and whether it already holds the special tokens (BOS) it needs."""
    if _FORMAT is None:
        return plain_layout(messages, open_reply), False
    _FORMAT.add_generation_prompt = open_reply
    return _FORMAT(messages=[{"role": r, "content": c} for r, c in messages]).prompt, True


def tokens_of(messages: tuple[tuple[str, str], ...], reply_start: str = "") -> tuple[list[int], int]:
    """The prompt's tokens (ending with `reply_start`, the answer's first words, when given), and
    how many of them the leading messages (all but the last) fill."""
    full, special = _text(messages, True)
    if reply_start:
        full += reply_start if _FORMAT is not None else f" {reply_start}"
    lead, _ = _text(messages[:-1], False)
    tok = lambda s: _LLM.tokenize(s.encode("utf-8"), add_bos=not special, special=True)  # noqa: E731
    a, b = tok(full), tok(lead) if messages[:-1] else []
    return a, common_prefix(a, b)


def _start_from(prefix: list[int]) -> None:
    """Put the cache in the state 'prefix evaluated alone from empty'."""
    global _START
    if _START == tuple(prefix) and _LLM.n_tokens >= len(prefix):
        _LLM.n_tokens = len(prefix)  # generate() drops the KV beyond this before its next eval
        return
    _LLM.reset()
    if prefix:
        _LLM.eval(prefix)
    _START = tuple(prefix)


def _one(req: ChatRequest, prompt: list[int]) -> ChatResult:
    if len(prompt) + req.max_tokens > _LLM.n_ctx():
        # Final for this request, as a server's "context too long" refusal is (openai_backend.py).
        return ChatResult(text="", error=REFUSED, refusal=f"prompt of {len(prompt)} tokens and {req.max_tokens} to "
                                                          f"answer do not fit the context ({_LLM.n_ctx()}; raise "
                                                          "oracle.backend.n_ctx)")
    r = _LLM.create_completion(prompt, max_tokens=req.max_tokens, temperature=req.temperature, seed=req.seed,
                               stop=list(STOP))
    usage = r.get("usage") or {}
    text = r["choices"][0].get("text") or ""
    if req.reply_start:
        text = req.reply_start + text
    return ChatResult(text=text, prompt_tokens=int(usage.get("prompt_tokens", 0)),
                      completion_tokens=int(usage.get("completion_tokens", 0)))


def complete_chains(chains: list[list[ChatRequest]]) -> list[list[ChatResult]]:
    """Several chains: decoded together when batching is on, else one after another."""
    if _BATCHED is not None and len(chains) > 1:
        return _BATCHED.complete_chains(chains, _tokenize)
    return [complete_chain(chain) for chain in chains]


def complete_chain(chain: list[ChatRequest]) -> list[ChatResult]:
    """Answer one chain in order, starting from the shared messages' canonical state."""
    global _START
    out = []
    for i, req in enumerate(chain):
        prompt, shared = tokens_of(req.messages, req.reply_start)
        if i == 0:
            _start_from(prompt[:shared])
        elif _START is not None and tuple(prompt[: len(_START)]) != _START:
            _START = None  # this prompt overwrites the canonical prefix
        out.append(_one(req, prompt))
    return out

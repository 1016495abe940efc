"""Embedded simulator speed: calls/s and generated tokens/s, before and after, on the same requests.

The requests are every oracle step below level 5 of the first N fixture dialogues (real benchmark
text, synthetic timings; tests/synthetic.py), built with the current prompts. Measured in turn:
  before   the previous backend: one worker process, one model instance on every core, each request
           sent alone through create_chat_completion, in ladder order (llama.cpp still reuses the
           KV prefix the previous prompt left behind);
  after    LlamaCppBackend as the oracle stage uses it: each dialogue one chain from the shared
           prefix, on its default instances (one single-threaded instance per core);
  1x2 / 1x1  the new backend on one instance with two threads / one thread (the design choice);
  batched  `after` with each instance decoding 8 chains together in one llama.cpp batch
           (oracle.backend.sequences: 8); its answers must equal `after`'s, and the row says so.
The machine is shared: compare the rows of one run, not runs with each other.

    python benchmarks/oracle_backend.py [--dialogues 8] [--model smollm2-135m | --model-path FILE.gguf]
                                        [--modes before after 1x2 batched]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kame_data.llm.base import ChatRequest, ChatResult  # noqa: E402
from kame_data.llm.llamacpp import LlamaCppBackend, cores, resolve_model_path  # noqa: E402
from kame_data.oracle.ladder import ladder  # noqa: E402
from kame_data.oracle.prompts import build_request  # noqa: E402
from kame_data.records import CHANNEL  # noqa: E402
from kame_data.workers import worker_pool  # noqa: E402
from tests.synthetic import fixture_dialogues  # noqa: E402

_LLM = None


def _load_before(path: str, threads: int) -> None:
    global _LLM
    from llama_cpp import Llama

    _LLM = Llama(model_path=path, n_ctx=2048, n_threads=threads, verbose=False, seed=0)


def _chat_before(req: ChatRequest) -> ChatResult:
    r = _LLM.create_chat_completion(messages=req.as_openai_messages(), max_tokens=req.max_tokens,
                                    temperature=req.temperature, seed=req.seed)
    u = r.get("usage") or {}
    return ChatResult(r["choices"][0]["message"].get("content") or "", int(u.get("prompt_tokens", 0)),
                      int(u.get("completion_tokens", 0)))


def before(path: Path, chains: list[list[ChatRequest]]) -> list[ChatResult]:
    pool = worker_pool(1, _load_before, (str(path), cores()))
    try:
        pool.submit(time.sleep, 0).result()  # loaded
        t = time.perf_counter()
        out = [f.result() for f in [pool.submit(_chat_before, r) for chain in chains for r in chain]]
        return out, time.perf_counter() - t
    finally:
        pool.shutdown()


def after(path: Path, chains: list[list[ChatRequest]], instances: int | None, threads: int | None,
          sequences: int = 1):
    backend = LlamaCppBackend(model_path=str(path), instances=instances, threads=threads, sequences=sequences)
    if backend.batch_note:
        print(f"  ({backend.batch_note})")
    try:
        t = time.perf_counter()
        out = [r for chain in backend.complete_chains(chains) for r in chain]
        return out, time.perf_counter() - t
    finally:
        backend.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dialogues", type=int, default=8)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--model-path", help="a GGUF file instead of the embedded model (another quantisation, say)")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--modes", nargs="+", default=["before", "after"], choices=["before", "after", "1x2", "1x1", "batched"])
    args = ap.parse_args()
    chains = []
    for r in fixture_dialogues(args.dialogues):
        steps = [s for s in ladder(r.words, 0.5, CHANNEL["A"], CHANNEL) if s.level < 5]
        chain = list(dict.fromkeys(build_request(s, args.max_tokens, 0.7, 0) for s in steps))  # distinct, in order
        chains.append(chain)
    calls = sum(len(c) for c in chains)
    path = resolve_model_path(args.model_path, args.model)
    print(f"{args.dialogues} fixture dialogues, {calls} distinct requests, model {path.name}, {cores()} cores, "
          f"load average {os.getloadavg()[0]:.1f} (others' work slows every row alike)")
    base = None
    answers: dict[str, list[ChatResult]] = {}
    for mode in args.modes:
        if mode == "before":
            out, secs = before(path, chains)
        else:
            instances, threads, sequences = {"after": (None, None, 1), "1x2": (1, 2, 1), "1x1": (1, 1, 1),
                                             "batched": (None, None, 8)}[mode]
            out, secs = after(path, chains, instances, threads, sequences)
            answers.setdefault(mode, out)
        gen = sum(r.completion_tokens for r in out)
        base = base or calls / secs
        same = ""
        if mode == "batched" and "after" in answers:
            same = "  answers identical to after: " + ("yes" if out == answers["after"] else
                                                      f"NO ({sum(a != b for a, b in zip(out, answers['after']))} differ)")
        print(f"{mode:>7}: {secs:7.1f} s  {calls / secs:5.2f} calls/s  {gen / secs:6.1f} generated tokens/s  "
              f"({gen / calls:.1f} tokens per answer)  x{calls / secs / base:.2f}{same}")


if __name__ == "__main__":
    main()

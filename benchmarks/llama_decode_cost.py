"""What one llama.cpp decode costs per token, by how many sequences share it: the ceiling of batched
embedded decoding (issue 34's "batched ≥ 2× one-at-a-time") on this CPU and build.

It loads the embedded model (or --model-path) as the oracle's workers do (one thread) and builds the
context `llm/llama_batch.BatchedDecoder` builds (one KV stream per sequence), fills every sequence
with --context tokens, then times, on the real `BatchedDecoder._decode`:
  width k   one decode of the next token of k sequences, logits for each (k = 1, 2, 4, 8);
  chunk     one sequence's prompt chunk of --chunk tokens, logits for the last only (the oracle's
            new prompt tokens per call: about 27, docs/design.md "The embedded simulator").
It prints milliseconds per decode and per token, and the most batching can gain on generation
(a lone token's cost over a token's share of a width-8 decode). Prompt chunks are decoded alone
(llama.cpp splits a step whose sequences bring unequal token counts), so the gain on a whole oracle
run is smaller: with a share s of the time in prompt chunks, at most 1 / (s + (1 - s) / gain).

    python benchmarks/llama_decode_cost.py [--model-path FILE.gguf] [--context 300] [--chunk 27] [--repeats 40]
                                            [--prompt-share 0.45]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kame_data.llm.llama_batch import BatchedDecoder  # noqa: E402
from kame_data.llm.llamacpp import resolve_model_path  # noqa: E402
from kame_data.machine import cpu_description  # noqa: E402

WIDTHS = (1, 2, 4, 8)
# Share of an oracle run's decode time spent in prompt chunks: 47.9 s of 107.6 s for the 277 calls of 8
# fixture dialogues' chains on one batched instance (Q4_1, 2026-12-05); 45% in an earlier one-sequence count.
PROMPT_SHARE = 0.45


def timed(decoder: BatchedDecoder, steps: list) -> float:
    """Seconds for one `_decode` of these (sequence, (tokens, logits)) steps; the sequences keep the tokens."""
    t = time.perf_counter()
    decoder._decode(steps)
    dt = time.perf_counter() - t
    for s, (tokens, _) in steps:
        s.tokens.extend(tokens)
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--model-path", help="a GGUF file instead of the embedded model (another quantisation, say)")
    ap.add_argument("--context", type=int, default=300, help="tokens each sequence holds before the timings")
    ap.add_argument("--chunk", type=int, default=27, help="tokens in the timed prompt chunk")
    ap.add_argument("--repeats", type=int, default=40, help="decodes timed per width")
    ap.add_argument("--prompt-share", type=float, default=PROMPT_SHARE,
                    help="share of an oracle run's decode time in prompt chunks, for the whole-run ceiling")
    args = ap.parse_args()
    from llama_cpp import Llama

    path = resolve_model_path(args.model_path, args.model)
    n_ctx = args.context + args.repeats * len(WIDTHS) + 4 * args.chunk + 64
    llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=1, n_threads_batch=1, verbose=False, seed=0)
    decoder = BatchedDecoder(llm, max(WIDTHS), n_ctx, threads=1)
    seqs = decoder.sequences
    print(f"{path.name}, one thread, {cpu_description()}, load average {os.getloadavg()[0]:.1f}; "
          f"each sequence holds {args.context} tokens")
    filler = llm.tokenize(b" the quick brown fox jumps over the lazy dog" * (args.context // 8 + 1))[: args.context]
    for s in seqs:
        for i in range(0, len(filler), decoder.n_batch):
            timed(decoder, [(s, (filler[i: i + decoder.n_batch], False))])
    token = filler[1]
    per_token = {}
    for k in WIDTHS:
        timed(decoder, [(s, ([token], True)) for s in seqs[:k]])  # warm
        secs = sum(timed(decoder, [(s, ([token], True)) for s in seqs[:k]]) for _ in range(args.repeats)) / args.repeats
        per_token[k] = secs / k
        print(f"  width {k}: {secs * 1000:6.1f} ms per decode, {per_token[k] * 1000:5.1f} ms per token")
    chunk = filler[: args.chunk]
    secs = sum(timed(decoder, [(seqs[0], (chunk, True))]) for _ in range(3)) / 3
    print(f"  chunk of {args.chunk}: {secs * 1000:6.1f} ms per decode, {secs / args.chunk * 1000:5.1f} ms per token")
    gain = per_token[1] / per_token[max(WIDTHS)]
    whole = 1 / (args.prompt_share + (1 - args.prompt_share) / gain)
    print(f"batching {max(WIDTHS)} sequences gains at most x{gain:.2f} on generation; with {args.prompt_share:.0%} of a run "
          f"in prompt chunks, at most x{whole:.2f} on a whole oracle run (issue 34 asks x2)")
    decoder.close()


if __name__ == "__main__":
    main()

"""What storing each LLM answer as it arrives costs, against storing a batch's answers after it
returns (the old way, which a budget stop or a kill could lose), and what the exact budget costs.

Starts the loopback OpenAI server in its own process, then sends the same N distinct requests
through the cached openai backend three times, each on a fresh cache:
  1. answers stored after the batch returns (baseline);
  2. answers stored one by one as they arrive (what kame-data does);
  3. as 2, with a budget meter that reserves each request's worst case (never reached).
Prints the best wall time of `--repeat` interleaved rounds and ratios against the baseline,
measured in the same run.

    python benchmarks/answer_cache.py [--requests 2000] [--latency 0.05] [--concurrency 64] [--repeat 3]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kame_data.llm.accounting import Account, Meter, Prices  # noqa: E402
from kame_data.llm.base import ChatRequest  # noqa: E402
from kame_data.llm.cache import CachedBackend, RequestCache  # noqa: E402
from kame_data.llm.openai_backend import OpenAIBackend  # noqa: E402
from tests.loopback_server import serve  # noqa: E402


def timed(base_url: str, reqs: list[ChatRequest], concurrency: int, stream: bool, meter: Account | None,
          folder: Path) -> float:
    inner = OpenAIBackend("bench", base_url=base_url, concurrency=concurrency, meter=meter)
    inner.streams_answers = stream  # the baseline: CachedBackend stores after the batch returns
    cache = RequestCache(folder / "cache.sqlite")
    backend = CachedBackend(inner, cache)
    backend.complete(reqs[:8])  # connections open, first sqlite write done
    t = time.perf_counter()
    out = backend.complete(reqs[8:])
    seconds = time.perf_counter() - t
    assert all(r.text for r in out) and backend.calls == len(reqs)
    inner.close()
    cache.close()
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    ready, stop = mp.Queue(), mp.Event()
    proc = mp.Process(target=serve, kwargs=dict(port=0, latency=args.latency, ready=ready, stop=stop), daemon=True)
    proc.start()
    base_url = f"http://127.0.0.1:{ready.get(timeout=30)}/v1"
    try:
        runs: dict[str, float] = {}
        configs = (("after the batch", False, False), ("as each arrives", True, False),
                   ("as each arrives + budget", True, True))
        for rep in range(args.repeat):  # interleaved, best of each: a loaded machine moves every figure
            for name, stream, budget in configs:
                reqs = [ChatRequest((("user", f"{rep} {name} question {i}: what comes after {i}?"),), max_tokens=32)
                        for i in range(args.requests)]
                meter = Account(Meter(1e9), Prices(0.1, 0.4)) if budget else None
                with tempfile.TemporaryDirectory() as tmp:
                    seconds = timed(base_url, reqs, args.concurrency, stream, meter, Path(tmp))
                runs[name] = min(seconds, runs.get(name, seconds))
    finally:
        stop.set()
        proc.join(10)
    base = runs["after the batch"]
    ideal = (args.requests - 8) * args.latency / args.concurrency
    print(f"{args.requests - 8} requests, server latency {args.latency * 1000:.0f} ms, concurrency "
          f"{args.concurrency} (ideal {ideal:.2f} s)")
    for name, seconds in runs.items():
        print(f"  answers stored {name:<26} {seconds:6.2f} s  {(args.requests - 8) / seconds:7.0f} req/s  "
              f"x{seconds / base:.2f} of the baseline")


if __name__ == "__main__":
    main()

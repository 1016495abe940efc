"""Oracle throughput: the reference-style sequential generator vs the oracle stage.

Starts an OpenAI-compatible server on loopback (its own process) with a fixed latency and
optional faults, then on the same dialogues runs
  1. a sequential baseline that behaves like the reference: one blocking call per 0.5 s step
     (level 5 included), no cache, no deduplication;
  2. the oracle stage (openai backend: async, bounded concurrency, cache, dedup), driven as
     `kame-data run` drives it: batches of `--batch-size` dialogues through the runner's local
     executor, as many at once as the step allows;
  3. the oracle stage again on the warm cache.
Prints calls made, distinct requests, wall times and the speed-up; with `--slots`, the share of
the bounded server's capacity the stage used (issue 34's goal: >= 90% at 16 slots x 200 ms, 40
dialogues).

    python benchmarks/oracle_throughput.py [--dialogues 100] [--latency 0.1] [--concurrency 32] [--faults] [--slots 16]
        [--batch-size 4]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kame_data.llm.cache import RequestCache  # noqa: E402
from kame_data.llm.config import BackendConfig
from kame_data.oracle.ladder import ladder  # noqa: E402
from kame_data.oracle.prompts import build_request  # noqa: E402
from kame_data.oracle.config import OracleConfig
from kame_data.oracle.stage import OracleStage  # noqa: E402
from kame_data.records import (
    CHANNEL,  # noqa: E402
    Sample,  # noqa: E402
)
from kame_data.runner.checkpoint import Keyed  # noqa: E402
from kame_data.runner.executor import RunStats  # noqa: E402
from kame_data.runner.local import LocalExecutor  # noqa: E402
from kame_data.step import RunContext
from tests.loopback_server import serve  # noqa: E402
from tests.synthetic import synthetic_dialogue  # noqa: E402


class Server:
    def __init__(self, latency: float, faults: bool, slots: int | None = None):
        rates = dict(error_500=0.2, rate_429=0.05, hang=0.05, garbage=0.02) if faults else {}
        rates["slots"] = slots  # bounded capacity: at most `slots` requests in service at once
        self.ready, self.stop = mp.Queue(), mp.Event()
        self.counters = mp.Array("l", 2)
        self.proc = mp.Process(target=serve, kwargs=dict(port=0, latency=latency, ready=self.ready,
                                                         counters=self.counters, stop=self.stop, **rates), daemon=True)

    def __enter__(self):
        self.proc.start()
        self.base_url = f"http://127.0.0.1:{self.ready.get(timeout=30)}/v1"
        return self

    def counts(self) -> tuple[int, int]:
        time.sleep(0.15)  # the server process refreshes its counters every 50 ms
        return self.counters[0], self.counters[1]

    def __exit__(self, *exc):
        self.stop.set()
        self.proc.join(10)


def baseline(dialogues, base_url: str, cfg: OracleConfig) -> int:
    """One blocking request per step, in order, like the reference generator."""
    from openai import OpenAI

    client = OpenAI(api_key="not-needed", base_url=base_url, timeout=cfg.backend.timeout, max_retries=6)
    calls = 0
    for r in dialogues:
        for step in ladder(r.words, cfg.interval, CHANNEL["A"], CHANNEL):
            req = build_request(step, cfg.backend.max_tokens, cfg.backend.temperature, seed=0)
            client.chat.completions.create(model="loopback", messages=req.as_openai_messages(),
                                           max_tokens=req.max_tokens, temperature=req.temperature, seed=req.seed)
            calls += 1
    return calls


def run_stage(stage: OracleStage, dialogues, batch_size: int) -> list:
    """The stage over `dialogues` as `kame-data run` runs it: batches through the local executor
    (no checkpoints), outputs in input order."""
    batches = [[Keyed(d.id, d) for d in dialogues[i:i + batch_size]] for i in range(0, len(dialogues), batch_size)]
    done = LocalExecutor().run([stage], iter(batches), None, RunStats(), lambda name, counts: None)
    return [k.record for batch in done for k in batch]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dialogues", type=int, default=100)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=BackendConfig().concurrency,
                    help="the backend's requests in flight (default: the backend's default, %(default)s)")
    ap.add_argument("--faults", action="store_true", help="20%% 500, 5%% 429, 5%% hangs, 2%% garbage")
    ap.add_argument("--batch-size", type=int, default=4, help="dialogues per batch (a recipe's batch_size; "
                    "default 4, the recipes' default)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the (slow) sequential baseline")
    ap.add_argument("--slots", type=int, default=None, help="a server of bounded capacity: at most this many "
                    "requests in service at once (capacity = slots / latency requests per second)")
    args = ap.parse_args()

    dialogues = [synthetic_dialogue(i, seed=1) for i in range(args.dialogues)]
    steps = sum(len(ladder(r.words, 0.5, CHANNEL["A"], CHANNEL)) for r in dialogues)
    minutes = sum(r.duration for r in dialogues) / 60
    print(f"{args.dialogues} dialogues, {minutes:.1f} min of speech, {steps} oracle steps, "
          f"server latency {args.latency * 1000:.0f} ms{', with faults' if args.faults else ''}")

    with Server(args.latency, args.faults, args.slots) as srv, tempfile.TemporaryDirectory() as tmp:
        cfg = OracleConfig(backend=BackendConfig(kind="openai", model="loopback", base_url=srv.base_url,
                                                 concurrency=args.concurrency, timeout=2.0, backoff_base=0.05))
        t = time.perf_counter()
        run_base = not (args.faults or args.no_baseline)
        base_calls = baseline(dialogues, srv.base_url, cfg) if run_base else 0
        t_base = time.perf_counter() - t
        c0, d0 = srv.counts()
        if run_base:
            print(f"baseline (sequential, reference-like): {c0} calls, {d0} distinct requests, {t_base:.2f} s")

        stage = OracleStage(cfg, RunContext(cache=RequestCache(Path(tmp) / "cache.sqlite")))
        stage.setup()
        t = time.perf_counter()
        out = run_stage(stage, dialogues, args.batch_size)
        t_stage = time.perf_counter() - t
        c1, d1 = srv.counts()
        calls, distinct = c1 - c0, stage.backend.calls
        samples = sum(isinstance(o, Sample) for o in out)
        print(f"oracle stage (cold cache): {calls} HTTP calls for {distinct} distinct requests, {t_stage:.2f} s, "
              f"{samples}/{len(dialogues)} dialogues complete; attempts by outcome {stage.summary()['predictions']}")
        if args.slots:
            bound = calls * args.latency / args.slots
            print(f"server of {args.slots} slots x {args.latency * 1000:.0f} ms: capacity bound {bound:.2f} s, "
                  f"share of its capacity used by the stage {bound / t_stage:.0%}"
                  + (f" (the baseline: {c0 * args.latency / args.slots / t_base:.0%})" if run_base else ""))

        warm = OracleStage(cfg, RunContext(cache=RequestCache(Path(tmp) / "cache.sqlite")))
        warm.setup()
        t = time.perf_counter()
        run_stage(warm, dialogues, args.batch_size)
        t_warm = time.perf_counter() - t
        c2, _ = srv.counts()
        print(f"oracle stage (warm cache): {c2 - c1} calls, {warm.backend.calls} sent, {t_warm:.2f} s")
        if run_base:
            print(f"speed-up vs baseline: {t_base / t_stage:.1f}x cold, {t_base / max(t_warm, 1e-9):.0f}x warm; "
                  f"calls {base_calls} -> {distinct} (calls made = distinct requests: {calls == distinct})")


if __name__ == "__main__":
    main()

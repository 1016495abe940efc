"""Parallelism through the path a user runs (`kame-data run`), against baselines in the same run.

1. speak: the same dialogues rendered with `speak.workers: 1` and `2` (`--until speak`); the fixed
   cost (start-up, sources, script) is measured by an `--until script` run and subtracted.
2. oracle: an OpenAI-compatible loopback server of bounded capacity (`--slots` requests in service
   at once, `--latency` s each: capacity = slots / latency requests per second) in its own
   process. A first run renders the dialogues; a second run changes only the oracle temperature,
   so only the oracle step recomputes, and its wall span (manifest `wall.oracle`) is compared with
   calls / capacity.

    python benchmarks/runner_parallelism.py [--speak-items 40] [--oracle-items 120] [--slots 16] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.loopback_server import serve  # noqa: E402

GSM8K = ROOT / "tests" / "data" / "sources" / "gsm8k_test_200.jsonl"
CLI = [sys.executable, "-m", "kame_data.cli.main"]


def recipe(path: Path, items: int, speak: dict, oracle: dict | None = None) -> Path:
    raw = {"name": "bench", "seed": 7, "sources": [{"kind": "gsm8k", "path": str(GSM8K), "limit": items}],
           "speak": speak, "publish": {"rows_per_shard": 50}, "batch_size": 4}
    if oracle:
        raw["oracle"] = oracle
    path.write_text(yaml.safe_dump(raw), "utf-8")
    return path


def run(recipe_path: Path, out: Path, *extra: str) -> float:
    t = time.perf_counter()
    r = subprocess.run(CLI + ["run", str(recipe_path), "--out", str(out), "-q", "--no-cache", *extra],
                       capture_output=True, text=True, env=os.environ.copy())
    if r.returncode != 0:
        raise SystemExit(f"kame-data run failed:\n{r.stderr[-3000:]}")
    return time.perf_counter() - t


def speak_scaling(tmp: Path, items: int) -> None:
    voices = {"assistant": {"engine": "piper", "voice": "joe"}, "user": {"engine": "hibari", "voice": "heart"},
              "qa": {"enabled": True}}
    fixed = run(recipe(tmp / "s0.yaml", items, {**voices, "workers": 1}), tmp / "s0", "--until", "script")
    one = run(recipe(tmp / "s1.yaml", items, {**voices, "workers": 1}), tmp / "s1", "--until", "speak")
    two = run(recipe(tmp / "s2.yaml", items, {**voices, "workers": 2}), tmp / "s2", "--until", "speak")
    print(f"speak, {items} GSM8K dialogues (piper + hibari, Whisper QA), kame-data run --until speak:")
    print(f"  fixed cost (--until script)   {fixed:7.1f} s")
    print(f"  workers 1                     {one:7.1f} s  (speak {one - fixed:6.1f} s)")
    print(f"  workers 2                     {two:7.1f} s  (speak {two - fixed:6.1f} s)")
    print(f"  speed-up of the speak step    {(one - fixed) / (two - fixed):7.2f}x   (whole command "
          f"{one / two:.2f}x)")


def oracle_utilisation(tmp: Path, items: int, slots: int, latency: float) -> None:
    ready, stop, counters = mp.Queue(), mp.Event(), mp.Array("l", 2)
    server = mp.Process(target=serve, kwargs=dict(port=0, latency=latency, slots=slots, ready=ready,
                                                  counters=counters, stop=stop), daemon=True)
    server.start()
    try:
        base_url = f"http://127.0.0.1:{ready.get(timeout=30)}/v1"
        # Fast voices: this measures the oracle step; speech only has to exist.
        speak = {"assistant": {"engine": "espeak", "voice": "en-us"}, "user": {"engine": "espeak", "voice": "en-us+f3"},
                 "workers": 2}
        backend = {"kind": "openai", "model": "loopback", "base_url": base_url, "concurrency": 2 * slots,
                   "temperature": 0.7}
        out = tmp / "o"
        run(recipe(tmp / "o1.yaml", items, speak, {"backend": backend}), out)
        before = counters[0]
        wall = run(recipe(tmp / "o2.yaml", items, speak, {"backend": {**backend, "temperature": 0.71}}), out)
        time.sleep(0.2)
        calls = counters[0] - before
    finally:
        stop.set()
        server.join(10)
    m = json.loads((out / "manifest.json").read_text("utf-8"))
    span = m["wall"]["oracle"]
    bound = calls * latency / slots
    print(f"oracle, {m['counts']['samples']} dialogues, server {slots} slots x {latency * 1000:.0f} ms "
          f"(capacity {slots / latency:.0f} requests/s), only the oracle recomputed (computed: {m['computed']}):")
    print(f"  requests served               {calls:7d}")
    print(f"  capacity bound                {bound:7.1f} s")
    print(f"  oracle step wall span         {span:7.1f} s   (whole command {wall:.1f} s)")
    print(f"  share of server capacity      {bound / span:7.0%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--speak-items", type=int, default=40)
    ap.add_argument("--oracle-items", type=int, default=120)
    ap.add_argument("--slots", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--only", choices=("speak", "oracle"))
    args = ap.parse_args()
    os.environ.setdefault("KAME_DATA_CACHE_DIR", tempfile.mkdtemp(prefix="kd-bench-cache-"))
    with tempfile.TemporaryDirectory(prefix="kd-bench-") as d:
        if args.only in (None, "speak"):
            speak_scaling(Path(d), args.speak_items)
        if args.only in (None, "oracle"):
            oracle_utilisation(Path(d), args.oracle_items, args.slots, args.latency)


if __name__ == "__main__":
    main()

"""Memory of a run vs its size: the runner streams, so 10x the items should not need 10x RAM.

Runs `kame-data run` on N and 10*N generated word problems, with the quickstart's voices and the
oracle on a loopback OpenAI-compatible server, and samples the memory of the whole run while it
goes: the summed RSS of the CLI process and every process under it (speak workers, the embedded
engines' children), every --interval seconds, with psutil. It prints each run's peak of that sum
(and the peak summed PSS, which counts pages shared between processes once), and the ratios.
Target: ratio <= 1.2.

    python benchmarks/runner_memory.py [--items 6] [--factor 10] [--interval 0.25]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil  # noqa: E402
import yaml  # noqa: E402

from kame_data.recipe import load_recipe  # noqa: E402
from tests.loopback_server import LoopbackServer  # noqa: E402

NAMES = ["Ana", "Ben", "Chloe", "Dev", "Ema", "Finn", "Gus", "Hana", "Ivo", "Jo"]
THINGS = ["apples", "books", "marbles", "stickers", "shells", "cards", "coins", "pens"]


def word_problems(n: int) -> list[dict]:
    rows = []
    for i in range(n):
        who, what = NAMES[i % len(NAMES)], THINGS[(i // len(NAMES)) % len(THINGS)]
        a, b = 3 + i % 17, 2 + (i * 7) % 11
        rows.append({"question": f"{who} has {a} {what} and finds {b} more. How many {what} does {who} have now?",
                     "answer": f"{who} has {a}+{b}=<<{a}+{b}={a + b}>>{a + b} {what}.\n#### {a + b}"})
    return rows


def tree_memory(root: psutil.Process) -> tuple[int, int, int]:
    """(summed RSS, summed PSS, processes) of `root` and all its descendants, in bytes."""
    rss = pss = n = 0
    for p in [root, *root.children(recursive=True)]:
        try:
            full = p.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        rss, pss, n = rss + full.rss, pss + getattr(full, "pss", full.rss), n + 1
    return rss, pss, n


def run(tmp: Path, n: int, base_url: str, interval: float) -> dict:
    data = tmp / f"items{n}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in word_problems(n)))
    qs = load_recipe("quickstart").raw
    recipe = {"name": f"memory-{n}", "seed": 1, "sources": [{"kind": "gsm8k", "path": str(data)}],
              "speak": qs.get("speak", {}), "publish": {"rows_per_shard": 8}, "batch_size": 4,
              "oracle": {"backend": {"kind": "openai", "model": "loopback", "base_url": base_url}}}
    path = tmp / f"recipe{n}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "kame_data.cli.main", "run", str(path), "--out",
                             str(tmp / f"out{n}"), "-q", "--no-cache"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    root = psutil.Process(proc.pid)
    peak = {"rss": 0, "pss": 0, "procs": 0, "samples": 0}
    while proc.poll() is None:
        rss, pss, procs = tree_memory(root)
        peak = {"rss": max(peak["rss"], rss), "pss": max(peak["pss"], pss), "procs": max(peak["procs"], procs),
                "samples": peak["samples"] + 1}
        time.sleep(interval)
    err = proc.stderr.read()
    if proc.returncode:
        sys.exit(err[-2000:])
    rows = json.loads((tmp / f"out{n}" / "manifest.json").read_text())["counts"]["samples"]
    return {**peak, "seconds": time.perf_counter() - t, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=6)
    ap.add_argument("--factor", type=int, default=10)
    ap.add_argument("--interval", type=float, default=0.25, help="seconds between samples")
    args = ap.parse_args()
    mib = 2 ** 20
    with LoopbackServer(latency=0.01) as srv, tempfile.TemporaryDirectory() as tmp:
        res = {}
        for n in (args.items, args.items * args.factor):
            r = res[n] = run(Path(tmp), n, srv.base_url, args.interval)
            print(f"{n:>5} items ({r['rows']} rows): peak summed RSS {r['rss'] / mib:6.0f} MiB, peak summed PSS "
                  f"{r['pss'] / mib:6.0f} MiB, up to {r['procs']} processes, {r['samples']} samples, "
                  f"{r['seconds']:.0f} s")
        small, large = res[args.items], res[args.items * args.factor]
        print(f"ratio {args.factor}N / N: summed RSS {large['rss'] / small['rss']:.2f}, summed PSS "
              f"{large['pss'] / small['pss']:.2f} (target <= 1.2)")


if __name__ == "__main__":
    main()

"""Peak memory of a run vs its size: the runner streams, so 10x the items should not need 10x RAM.

Runs the CLI (as a child process) on N and 10*N generated word problems, with the quickstart's
voices and the oracle on a loopback OpenAI-compatible server, and prints each run's peak RSS
(the largest of the run's processes) and the ratio. Target: ratio <= 1.2.

    python benchmarks/runner_memory.py [--items 6] [--factor 10]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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


def run(tmp: Path, n: int, base_url: str) -> tuple[float, float]:
    data = tmp / f"items{n}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in word_problems(n)))
    qs = load_recipe("quickstart").raw
    recipe = {"name": f"memory-{n}", "seed": 1, "sources": [{"kind": "gsm8k", "path": str(data)}],
              "speak": qs.get("speak", {}), "publish": {"rows_per_shard": 8}, "batch_size": 4,
              "oracle": {"backend": {"kind": "openai", "model": "loopback", "base_url": base_url}}}
    path = tmp / f"recipe{n}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    t = time.perf_counter()
    # A fresh intermediate process per run, so its children's peak is this run's alone.
    r = subprocess.run([sys.executable, __file__, "--child", str(path), str(tmp / f"out{n}")],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr[-2000:])
    return float(r.stdout.split()[-1]) / 1024, time.perf_counter() - t


def child(recipe: str, out: str) -> None:
    """Run the CLI and print the peak RSS (KiB) of its processes."""
    r = subprocess.run([sys.executable, "-m", "kame_data.cli.main", "run", recipe, "--out", out, "-q", "--no-cache"],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr[-2000:])
    print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=6)
    ap.add_argument("--factor", type=int, default=10)
    args = ap.parse_args()
    with LoopbackServer(latency=0.01) as srv, tempfile.TemporaryDirectory() as tmp:
        small, t_small = run(Path(tmp), args.items, srv.base_url)
        print(f"{args.items:>5} items: peak RSS {small:.0f} MiB, {t_small:.0f} s")
        large, t_large = run(Path(tmp), args.items * args.factor, srv.base_url)
        print(f"{args.items * args.factor:>5} items: peak RSS {large:.0f} MiB, {t_large:.0f} s")
        print(f"ratio {large / small:.2f} (target <= 1.2)")


if __name__ == "__main__":
    main()

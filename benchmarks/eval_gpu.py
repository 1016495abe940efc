"""The spoken MT-Bench evaluation of a real checkpoint on a GPU, in one script to run when a GPU is
lent: `kame-data eval build` (if the question set is not built yet), then `kame-data eval run
--device cuda` with the oracle off and with it on, printing seconds per question, the real-time
factor of generation, and the latency and turn-taking figures from the answer files.

Without a GPU it says so and measures on the CPU only with `--device cpu` (the tiny model's path,
for keeping the script honest); a real 7B checkpoint on a CPU is not a measurement anyone needs.

    python benchmarks/eval_gpu.py CKPT --built out/eval                         # on a GPU machine
    python benchmarks/eval_gpu.py out/train/train_tiny --device cpu --limit 2   # anywhere
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CLI = [sys.executable, "-m", "kame_data.cli.main", "eval"]


def cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def run(*args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(CLI + list(args), check=True)
    return time.perf_counter() - t0


def figures(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    turns = [t for r in rows for t in (r.get("kame") or {}).get("turns", [])]
    lat = [t["latency"] for t in turns if t["latency"] is not None]
    took = sum(t["took_turn"] for t in turns) / max(1, len(turns))
    med = f"{statistics.median(lat):.2f} s" if lat else "-"
    return f"{len(rows)} questions, took the turn {took:.0%}, latency median {med}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--built", default="out/eval")
    ap.add_argument("--out", default="out/eval-gpu")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--limit", type=int, default=None, help="Build only the first N questions (a new set).")
    ap.add_argument("--oracle", default="embedded", help="The oracle of the second run (embedded or openai).")
    ap.add_argument("--delay", type=float, default=0.5)
    args = ap.parse_args()
    if args.device.startswith("cuda") and not cuda():
        print("no GPU here: nothing measured (use --device cpu with a tiny checkpoint to check the script)")
        return
    built = Path(args.built)
    if not (built / "eval_questions.jsonl").is_file():
        spent = run("build", "-o", str(built), *(["--limit", str(args.limit)] if args.limit else []))
        print(f"eval build: {spent:.0f} s")
    n = sum(1 for line in (built / "eval_questions.jsonl").read_text("utf-8").splitlines() if line.strip())
    name = Path(args.checkpoint).name
    for oracle, extra in (("none", []), (args.oracle, ["--delay", str(args.delay)])):
        rid = f"{name}-{oracle}"
        spent = run("run", args.checkpoint, "--built", str(built), "-o", args.out, "--oracle", oracle,
                    "--device", args.device, "--name", rid, *extra)
        print(f"eval run --oracle {oracle} on {args.device}: {spent:.0f} s, {spent / n:.1f} s per question; "
              f"{figures(Path(args.out) / 'model_answer' / f'{rid}.jsonl')}")


if __name__ == "__main__":
    main()

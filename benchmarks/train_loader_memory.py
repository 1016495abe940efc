"""Memory of the trainer's data loader vs the size of the token dataset: 12 and 1,200 dialogues.

Writes two token datasets in the trainer's Parquet layout (random codes and oracle events of paper
size: 300 to 700 frames per dialogue, 5 to 40 events per speaker), then, in a fresh process for
each, draws the same number of global batches (8 windows of up to 128 frames, Moshi 7B's 8 + 8
codebooks, augmentation on) and reports that process's peak RSS (read after every batch) above its
RSS after imports:

- streaming: `sampler.Loader` over `TokenShards` (what `kame-data train` does now);
- whole split (the baseline, the trainer's former loader): every row read with `to_pylist`, every
  window built up front.

    python benchmarks/train_loader_memory.py [--sizes 12 1200] [--batches 300]
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

ARGS = (["A"], 16, 8, 128)  # speakers, n_q, dep_q, max_frames: Moshi 7B's codebooks


def child(mode: str, tokens: str, batches: int) -> None:
    """Draw `batches` batches and print JSON figures (run in its own process). RSS is sampled every
    2 ms by a thread (ru_maxrss would not do: Linux carries the parent's high-water mark across exec)."""
    import threading

    import psutil
    import pyarrow.parquet as pq

    from kame_data.train.data import windows_from_rows
    from kame_data.train.sampler import Loader, TokenShards
    from kame_data.train.streams import OracleAugment

    files = sorted(Path(tokens).glob("train-*.parquet"))
    aug = OracleAugment(0.1, 0.7, 0.3, (1, 10), (1, 15))
    me = psutil.Process()
    base = me.memory_info().rss // 1024
    peak, done = [base], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], me.memory_info().rss // 1024)
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t = time.perf_counter()
    if mode == "streaming":
        source = TokenShards(files, *ARGS)
    else:
        rows = [r for f in files for r in pq.read_table(f).to_pylist()]
        source = windows_from_rows(rows, *ARGS)
        del rows
    loader = Loader(source, 8, 0, 32000, aug)
    frames = sum(int((loader.next_batch().codes[:, 0] >= 0).sum()) for _ in range(batches))
    done.set()
    sampler.join()
    peak = peak[0]
    print(json.dumps({"base_kib": base, "peak_kib": peak, "frames": frames, "seconds": time.perf_counter() - t,
                      "epoch": loader.state()["epoch"]}))


def measure(mode: str, tokens: Path, batches: int) -> dict:
    r = subprocess.run([sys.executable, __file__, "--child", mode, str(tokens), str(batches)],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs=2, default=[12, 1200])
    ap.add_argument("--batches", type=int, default=300)
    args = ap.parse_args()
    from tests.synthetic_tokens import write_token_dataset

    mib = 1024
    with tempfile.TemporaryDirectory(prefix="kd-loader-") as d:
        res = {}
        for n in args.sizes:
            t = time.perf_counter()
            tokens = write_token_dataset(Path(d) / f"t{n}", n, seed=n, frames=(300, 700), vocab=32000, card=2048)
            size = sum(f.stat().st_size for f in tokens.glob("*.parquet")) / 2**20
            print(f"{n:>5} dialogues: {size:6.1f} MiB of token Parquet (written in {time.perf_counter() - t:.0f} s)")
            for mode in ("streaming", "whole split"):
                r = res[(mode, n)] = measure(mode, tokens, args.batches)
                print(f"       {mode:<11}: loader memory {(r['peak_kib'] - r['base_kib']) / mib:7.1f} MiB above "
                      f"{r['base_kib'] / mib:.0f} MiB after imports; {args.batches} batches in {r['seconds']:.1f} s "
                      f"(epoch {r['epoch']})")
        small, large = args.sizes
        for mode in ("streaming", "whole split"):
            a, b = res[(mode, small)], res[(mode, large)]
            grow = (b["peak_kib"] - b["base_kib"]) / max(1, a["peak_kib"] - a["base_kib"])
            print(f"{mode:<11}: {large} vs {small} dialogues: loader memory x{grow:.2f}, peak RSS "
                  f"x{b['peak_kib'] / a['peak_kib']:.2f}")


if __name__ == "__main__":
    main()

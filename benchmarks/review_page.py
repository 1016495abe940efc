"""How fast does the review page for 200 dialogues open in a real browser?

Builds a 200-dialogue dataset cheaply by replicating the rows of a small real output under new
ids (no TTS run 200 times), writes its review page, opens it in headless Chromium a few times and
prints: navigation start -> load event, -> first contentful paint, -> first cards rendered,
-> all cards rendered (medians). Goal: load under 2 s.

    python benchmarks/review_page.py                       # runs the quickstart (3 items) first
    python benchmarks/review_page.py --from out/quickstart --dialogues 200 --audio auto
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kame_data.review.html import write_review  # noqa: E402
from tests.chromium import Browser, available  # noqa: E402


def small_output(work: Path) -> Path:
    out = work / "quickstart"
    cmd = [sys.executable, "-m", "kame_data.cli.main", "run", "quickstart", "--out", str(out), "--limit", "3", "--quiet"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


def replicate(src: Path, dest: Path, n: int, rows_per_shard: int = 100) -> Path:
    """A dataset of `n` rows: copies of `src`'s rows, cycled, with ids made unique."""
    manifest = json.loads((src / "manifest.json").read_text())
    base = pa.concat_tables([pq.read_table(src / s["path"]) for s in manifest["shards"]])
    parts, k = [], 0
    while k < n:
        take = base.slice(0, min(base.num_rows, n - k))
        ids = pc.binary_join_element_wise(take["id"], pa.array([f"r{k + i:04d}" for i in range(take.num_rows)]), "-")
        parts.append(take.set_column(take.schema.get_field_index("id"), "id", ids))
        k += take.num_rows
    table = pa.concat_tables(parts)
    (dest / "data").mkdir(parents=True)
    shards = []
    count = (n + rows_per_shard - 1) // rows_per_shard
    for i in range(count):
        name = f"data/train-{i:05d}-of-{count:05d}.parquet"
        part = table.slice(i * rows_per_shard, rows_per_shard)
        pq.write_table(part, dest / name, compression="zstd", row_group_size=8)
        shards.append({"path": name, "split": "train", "rows": part.num_rows})
    manifest["shards"] = shards
    manifest["counts"]["samples"] = n
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=2))
    if (src / "rejects.jsonl").is_file():
        shutil.copy(src / "rejects.jsonl", dest / "rejects.jsonl")
    return dest


TIMINGS = """(() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const mark = (n) => { const m = performance.getEntriesByName(n)[0]; return m ? m.startTime : null; };
  const fcp = performance.getEntriesByName('first-contentful-paint')[0];
  return {load: nav.loadEventStart, dcl: nav.domContentLoadedEventStart, fcp: fcp ? fcp.startTime : null,
          first_cards: mark('kame:first-cards'), all_cards: mark('kame:all-cards'),
          cards: document.querySelectorAll('.card').length};
})()"""


def measure(page: Path, runs: int) -> list[dict]:
    results = []
    with Browser(width=1280, height=900, timeout=120) as b:
        for _ in range(runs):
            b.navigate("about:blank")
            b.navigate(page.resolve().as_uri())
            deadline = time.monotonic() + 60
            while b.eval("document.body.dataset.ready") != "1":
                if time.monotonic() > deadline:
                    raise RuntimeError("the page never finished rendering its cards")
                time.sleep(0.05)
            results.append(b.eval(TIMINGS))
        if b.errors:
            raise RuntimeError(f"console errors: {b.errors}")
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="src", type=Path, help="a small real output (default: run the quickstart on 3 items)")
    ap.add_argument("--dialogues", type=int, default=200)
    ap.add_argument("--audio", default="auto", choices=["auto", "wav", "opus", "none"])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="also copy the page here")
    args = ap.parse_args()
    if not available():
        sys.exit("benchmark needs /usr/bin/chromium (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        src = args.src or small_output(work)
        data = replicate(src, work / "bench", args.dialogues)
        t0 = time.perf_counter()
        page = write_review(data, work / "review.html", audio=args.audio)
        build = time.perf_counter() - t0
        if args.keep:
            shutil.copy(page.path, args.keep)
        res = measure(page.path, args.runs)
    med = {k: statistics.median(r[k] for r in res) for k in ("load", "dcl", "fcp", "first_cards", "all_cards")}
    print(f"review page: {page.cards} cards, audio {page.audio}, {page.size / 1e6:.1f} MB, built in {build:.1f} s "
          f"({os.cpu_count()} CPUs)")
    print(f"chromium, median of {len(res)} loads (ms from navigation start):")
    for k, label in (("first_cards", "first cards rendered"), ("fcp", "first contentful paint"),
                     ("dcl", "DOMContentLoaded"), ("load", "load event"), ("all_cards", "all cards rendered")):
        print(f"  {label:<24}{med[k]:8.0f}   (runs: {', '.join(f'{r[k]:.0f}' for r in res)})")
    ok = med["load"] < 2000 and res[0]["cards"] == args.dialogues
    print("OK: opens in under 2 s" if ok else "SLOW: the load event came after 2 s")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

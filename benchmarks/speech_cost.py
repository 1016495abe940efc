"""What the speech path costs, in CPU seconds of every process per second of audio, measured through
the command a user runs: `kame-data run RECIPE --until acoustics` (script -> speech -> QA -> quality
-> acoustics, checkpoints written), and then the writer over the same dialogues (a full run from
those checkpoints with the oracle on a loopback server, so only the oracle step and the writer work).

The recipe is the quickstart's (its voices, QA, answer round-trip, quality and acoustics settings)
on real fixture rows (GSM8K and MMLU-Pro from tests/data/sources). Runs, on an idle machine:

1. cold:  an empty cache folder (voice screening, the assembled Whisper model), fresh OUT;
2. warm:  the same command again into a fresh OUT with the caches warm;
3. small: warm, on the first `--small` items only; the margin is (warm - small) / (audio difference),
          what one more second of audio costs once everything is loaded;
4. write: the writer's own CPU per audio second (manifest `timings.write`, in the driver).

CPU time is the benchmark's children's rusage (every process, workers included, user + sys). Per
piece (engine, Whisper, pauses, mixing, the answer round-trip, DNSMOS, VAD, loudness, acoustics,
checkpoints) it comes from the processes themselves (kame_data/costs.py, KAME_DATA_COSTS).

    python benchmarks/speech_cost.py [--items 56] [--small 16] [--workers 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kame_data.costs import ENV, process_cpu, read  # noqa: E402
from tests.loopback_server import serve  # noqa: E402

SOURCES = ROOT / "tests" / "data" / "sources"
CLI = [sys.executable, "-m", "kame_data.cli.main"]
TARGET, TARGET_COLD, TARGET_BEYOND_ENGINES = 0.15, 0.25, 0.08  # issue 32's goals, core-s per audio second


def recipe(path: Path, items: int, workers: int, oracle: dict | None = None, pool: str | None = None) -> Path:
    qs = yaml.safe_load((ROOT / "recipes" / "quickstart.yaml").read_text("utf-8"))
    half = (items + 1) // 2
    speak = {**qs["speak"], "workers": workers, **({"user": pool} if pool else {})}
    raw = {**qs, "name": "speech-cost",
           "sources": [{"kind": "gsm8k", "path": str(SOURCES / "gsm8k_test_200.jsonl"), "limit": half},
                       {"kind": "mmlu_pro", "path": str(SOURCES / "mmlu_pro_test_300.jsonl"), "limit": items - half}],
           "speak": speak, "publish": {"rows_per_shard": 16}}
    raw["script"] = {**qs["script"], "max_turn_seconds": 30}  # real rows: keep the turns the quickstart keeps
    if oracle:
        raw["oracle"] = oracle
    path.write_text(yaml.safe_dump(raw), "utf-8")
    return path


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(recipe_path: Path, out: Path, cache: Path, costs: Path, *extra: str) -> dict:
    """One `kame-data run`: wall and CPU (all processes), audio seconds, pieces."""
    env = {**os.environ, "KAME_DATA_CACHE_DIR": str(cache), ENV: str(costs)}
    before, t = children_cpu(), time.perf_counter()
    proc = subprocess.Popen(CLI + ["run", str(recipe_path), "--out", str(out), "-q", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _, stderr = proc.communicate()
    wall, cpu = time.perf_counter() - t, children_cpu() - before
    if proc.returncode != 0:
        raise SystemExit(f"kame-data run failed:\n{stderr[-3000:]}")
    rendered = out / "rendered.jsonl"
    audio = sum(json.loads(line)["duration"] for line in rendered.read_text().splitlines()) if rendered.exists() \
        else None
    return {"wall": wall, "cpu": cpu, "audio": audio, "pieces": read(costs) if costs.exists() else {},
            "driver_cpu": process_cpu(costs, proc.pid),  # the `kame-data run` process itself, all of its CPU
            "dialogues": len(rendered.read_text().splitlines()) if rendered.exists() else None}


def table(name: str, m: dict) -> None:
    print(f"  {name:<6} {m['dialogues']:>4} dialogues {m['audio']:8.1f} s audio  wall {m['wall']:7.1f} s  "
          f"CPU {m['cpu']:7.1f} s  = {m['cpu'] / m['audio']:.3f} core-s per audio s")


PIECES = [  # (label, keys summed): what each piece of the path is
    ("TTS engines (synthesis)", ["speak.engine"]),
    ("Whisper (QA + alignment)", ["speak.whisper"]),
    ("QA compare (line-up, WER)", ["speak.qa"]),
    ("answer round-trip", ["speak.answer"]),
    ("pauses, loudness, resample", ["speak.shape"]),
    ("mixing, backchannels", ["speak.mix"]),
    ("voice screening", ["speak.screen"]),
    ("quality: DNSMOS", ["quality.dnsmos"]),
    ("quality: VAD", ["quality.vad"]),
    ("quality: loudness, resample", ["quality.rest"]),
    ("acoustics", ["acoustics"]),
    ("checkpoints (encode, write)", ["checkpoint.write", "checkpoint.read"]),
    ("writer (rows, Parquet)", ["write"]),
]


def pieces(m: dict, audio: float) -> None:
    known = 0.0
    for label, keys in PIECES:
        s = sum(m["pieces"].get(k, 0.0) for k in keys)
        known += s
        print(f"    {label:<30} {s:8.1f} s  {s / audio:.4f} per audio s")
    rest = m["cpu"] - known
    print(f"    {'the rest (start-up, imports, …)':<30} {rest:8.1f} s  {rest / audio:.4f} per audio s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=56, help="source items (some are rejected: too long, ...)")
    ap.add_argument("--small", type=int, default=16, help="items of the small run the margin is taken against")
    ap.add_argument("--workers", type=int, default=2, help="speak.workers")
    ap.add_argument("--pool", help="speak.user pool instead of the quickstart's (`kame-data voices list`): "
                    "bundled-users is piper and hibari only, the engines issue 32's 0.15 goal names")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kd-speech-cost-") as tmp_s:
        tmp = Path(tmp_s)
        cache = tmp / "cache"
        big = recipe(tmp / "big.yaml", args.items, args.workers, pool=args.pool)
        cold = run(big, tmp / "cold", cache, tmp / "costs-cold", "--until", "acoustics")
        warm = run(big, tmp / "warm", cache, tmp / "costs-warm", "--until", "acoustics")
        small = run(recipe(tmp / "small.yaml", args.small, args.workers, pool=args.pool), tmp / "small", cache,
                    tmp / "costs-small", "--until", "acoustics")
        # The writer: the warm run's speech from its checkpoints, the oracle on a fast loopback server.
        ready, stop = mp.Queue(), mp.Event()
        server = mp.Process(target=serve, kwargs=dict(port=0, latency=0.0, ready=ready, stop=stop), daemon=True)
        server.start()
        try:
            oracle = {"interval": 0.5, "target": "assistant",
                      "backend": {"kind": "openai", "model": "loopback", "concurrency": 64,
                                  "base_url": f"http://127.0.0.1:{ready.get(timeout=30)}/v1"}}
            full = recipe(tmp / "full.yaml", args.items, args.workers, oracle, args.pool)
            written = run(full, tmp / "full", cache, tmp / "costs-full", "--checkpoints",
                          str(tmp / "warm" / ".checkpoints"))
        finally:
            stop.set()
            server.join(10)
        manifest = json.loads((tmp / "full" / "manifest.json").read_text())
    audio_written = manifest["audio_hours"] * 3600
    write_s = manifest["timings"]["write"]
    margin = (warm["cpu"] - small["cpu"]) / (warm["audio"] - small["audio"])
    print(f"speech path, quickstart settings on {warm['dialogues']} real dialogues (workers {args.workers}, "
          f"user pool {args.pool or 'as the quickstart'}), kame-data run --until acoustics:")
    for name, m in (("cold", cold), ("warm", warm), ("small", small)):
        table(name, m)
    engine = {name: m["pieces"].get("speak.engine", 0.0) for name, m in (("warm", warm), ("small", small))}
    engines = engine["warm"] / warm["audio"]
    engine_margin = (engine["warm"] - engine["small"]) / (warm["audio"] - small["audio"])
    print(f"  margin (warm - small)          {margin:.3f} core-s per audio s   (goal <= {TARGET})")
    print(f"  cold, all in                   {cold['cpu'] / cold['audio']:.3f} core-s per audio s   "
          f"(goal <= {TARGET_COLD})")
    print(f"  beyond the engines' synthesis  {margin - engine_margin:.3f} core-s per audio s at the margin, "
          f"{(warm['cpu'] - engine['warm']) / warm['audio']:.3f} warm average   (goal <= {TARGET_BEYOND_ENGINES}; "
          f"engines {engine_margin:.3f} at the margin, {engines:.3f} warm average)")
    print(f"  writer (driver, one core)      {write_s / audio_written:.4f} s per audio s "
          f"({write_s:.1f} s for {audio_written:.0f} s of audio)")
    driver = written.get("driver_cpu")
    if driver is not None:
        path_cost = warm["cpu"] / warm["audio"]
        print(f"  driver process, whole run      {driver / audio_written:.4f} core-s per audio s "
              f"(all of its CPU, writer included: 1/{path_cost * audio_written / max(driver, 1e-9):.0f} of the "
              f"speech path's {path_cost:.3f}; goal <= 1/16)")
    print("  per piece, warm run (CPU s; pieces measured in their own processes):")
    pieces(warm, warm["audio"])
    if args.json:
        args.json.write_text(json.dumps({"cold": cold, "warm": warm, "small": small, "margin": margin,
                                         "writer_s_per_audio_s": write_s / audio_written,
                                         "driver_s_per_audio_s": (driver or 0.0) / audio_written}, indent=1))


if __name__ == "__main__":
    main()

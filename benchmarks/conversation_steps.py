"""The cost of each conversation step per dialogue-minute, through `kame-data run`, against the plain
speak step measured in the same run of this script (so a loaded machine moves both alike).

Four runs over the same GSM8K dialogues, one worker process (busy time = CPU time), the oracle on an
OpenAI-compatible loopback server (its cost is not measured here):

  base      piper Joe + hibari heart with per-turn Whisper QA; the quality and acoustics steps on
            (each is a step of its own, so its seconds come straight from the manifest's timings)
  variants  the user drawn from Praat speaker variants of heart instead (speak time minus base)
  turns     backchannels (8 per minute) and barge-ins on            (speak time minus base)
  answer    the Whisper answer round-trip on the assistant channel  (speak time minus base)

Voice screening is a one-off per run and voice: its seconds per voice are printed apart.

    python benchmarks/conversation_steps.py [--items 8]
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
BASE = {"assistant": "joe", "user": "heart", "workers": 1, "qa": {"enabled": True}}
RUNS = {
    "base": {},
    "variants": {"user": ["heart-low", "heart-m"]},
    "turns": {"turns": {"backchannels_per_minute": 8, "barge_in_rate": 0.5}},
    "answer": {"answer": {"enabled": True}},
}


def run(tmp: Path, name: str, items: int, speak: dict, base_url: str) -> dict:
    raw = {"name": f"bench-{name}", "seed": 7, "sources": [{"kind": "gsm8k", "path": str(GSM8K), "limit": items}],
           "speak": speak, "quality": {"enabled": True}, "acoustics": {"enabled": True},
           "oracle": {"backend": {"kind": "openai", "model": "loopback", "base_url": base_url, "concurrency": 32}},
           "publish": {"rows_per_shard": 50}, "batch_size": 4}
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw), "utf-8")
    r = subprocess.run(CLI + ["run", str(path), "--out", str(tmp / name), "-q", "--no-cache"],
                       capture_output=True, text=True, env=os.environ.copy())
    if r.returncode != 0:
        raise SystemExit(f"kame-data run failed:\n{r.stderr[-3000:]}")
    return json.loads((tmp / name / "manifest.json").read_text("utf-8"))


def screening_seconds(voice: str = "heart-m") -> float:
    """Seconds to screen one voice over 4 sentences (loads excluded)."""
    from kame_data.speech.voice import open_engine
    from kame_data.speech.screen import ScreenConfig, voice_wers
    from kame_data.speech.voices import BUNDLED
    from kame_data.speech.whisper import WhisperAligner

    engine, aligner = open_engine(BUNDLED[voice], 1), WhisperAligner(1)
    engine.synthesize("warm up")
    t = time.perf_counter()
    voice_wers([engine], aligner, ScreenConfig(sentences=4))
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=8)
    args = ap.parse_args()
    os.environ.setdefault("KAME_DATA_CACHE_DIR", tempfile.mkdtemp(prefix="kd-bench-cache-"))
    ready, stop = mp.Queue(), mp.Event()
    server = mp.Process(target=serve, kwargs=dict(port=0, latency=0.0, ready=ready, stop=stop), daemon=True)
    server.start()
    manifests = {}
    try:
        base_url = f"http://127.0.0.1:{ready.get(timeout=30)}/v1"
        with tempfile.TemporaryDirectory(prefix="kd-bench-") as d:
            for name, change in RUNS.items():
                manifests[name] = run(Path(d), name, args.items, {**BASE, **change}, base_url)
    finally:
        stop.set()
        server.join(10)
    base = manifests["base"]
    minutes = {k: m["audio_hours"] * 60 for k, m in manifests.items()}
    speak0 = base["timings"]["speak"] / minutes["base"]
    print(f"{base['counts']['samples']} GSM8K dialogues per run, {minutes['base']:.2f} dialogue-minutes (base), "
          "one speak worker; CPU seconds per dialogue-minute (ratio to the plain speak step):")
    print(f"  speak, plain (TTS + Whisper QA)   {speak0:7.1f} s   1.00")
    for step in ("quality", "acoustics"):
        per = base["timings"][step] / minutes["base"]
        print(f"  {step:<33} {per:7.1f} s   {per / speak0:.2f}")
    for name in ("variants", "turns", "answer"):
        per = manifests[name]["timings"]["speak"] / minutes[name] - speak0
        print(f"  + {name:<31} {per:7.1f} s   {per / speak0:.2f}")
    live = manifests["turns"]["quality"].get("turn_taking", {})
    print(f"  (turns run: {live.get('backchannels', 0)} backchannels, {live.get('barge_ins', 0)} barge-ins)")
    print(f"voice screening, once per run and voice (4 sentences): {screening_seconds():.1f} s")


if __name__ == "__main__":
    main()

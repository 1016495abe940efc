"""The TTS engine interface and the registry of engines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol

import numpy as np

Span = tuple[Optional[float], Optional[float]]


@dataclass(frozen=True)
class VoiceConfig:
    """A voice: an engine, its voice name and the engine's knobs (unused knobs are ignored)."""

    engine: str = "piper"
    voice: str = "joe"
    length_scale: float = 1.0
    noise_scale: float = 0.667
    noise_w_scale: float = 0.8
    rate: int = 165
    pitch: int = 50

    @property
    def label(self) -> str:
        return f"{self.engine}:{self.voice}"


@dataclass(frozen=True)
class Synthesis:
    """Mono float32 audio plus, for each input word, its (start, end) in seconds (None: unknown)."""

    audio: np.ndarray
    sample_rate: int
    spans: list[Span]


class TTSEngine(Protocol):
    label: str

    def synthesize(self, text: str) -> Synthesis:
        """Speak `text`; spans follow `spoken_tokens(text)` one to one."""
        ...


def open_engine(cfg: VoiceConfig) -> TTSEngine:
    """Load the engine for a voice (model files are loaded here, once)."""
    if cfg.engine == "piper":
        from kame_data.speech.piper_engine import PiperEngine

        return PiperEngine(cfg)
    if cfg.engine == "espeak":
        from kame_data.speech.espeak_engine import EspeakEngine

        return EspeakEngine(cfg)
    raise ValueError(f"unknown TTS engine {cfg.engine!r} (available: piper, espeak)")

"""What every TTS engine hands back: mono float audio plus one (start, end) span per spoken word.

A leaf, so the engine modules, the aligner and the renderer share these types without importing
each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol

import numpy as np

Span = tuple[Optional[float], Optional[float]]


@dataclass(frozen=True)
class Synthesis:
    """Mono float32 audio plus, for each input word, its (start, end) in seconds (None: unknown)."""

    audio: np.ndarray
    sample_rate: int
    spans: list[Span]


class TTSEngine(Protocol):
    def synthesize(self, text: str) -> Synthesis:
        """Speak `text`; spans follow `spoken_tokens(text)` one to one (all None for an engine whose
        spec says it is not timed)."""
        ...

"""hibari: a small neural voice (bundled female US voice `heart`, 24 kHz) with no alignment API.

Its spans are unknown (`timed = False`): the speak stage times its words with the Whisper
aligner. Only the bundled voice is allowed, because hibari downloads any other voice on first
use and nothing may be downloaded at run time.
"""

from __future__ import annotations

import zlib

import numpy as np

from kame_data.speech.engines import Synthesis, VoiceConfig
from kame_data.text import spoken_tokens


class HibariEngine:
    def __init__(self, cfg: VoiceConfig, threads: int | None = None):
        try:
            from hibari import Hibari
            from hibari.voices import VOICES, voice_path
        except ImportError as e:
            raise RuntimeError("hibari voices need `pip install hibari-tts` (kame-data[tts])") from e
        if cfg.voice not in VOICES:
            raise RuntimeError(f"hibari has no voice {cfg.voice!r}; the bundled one is 'heart'")
        try:
            model = voice_path(cfg.voice, download_missing=False)
        except FileNotFoundError as e:
            raise RuntimeError(f"hibari voice {cfg.voice!r} is not bundled and would be downloaded; "
                               "use 'heart' (or copy the voice file into hibari's cache by hand)") from e
        self.tts = Hibari(voice=cfg.voice, model=model, threads=threads or 1)
        self.speed = cfg.speed
        self.sample_rate = self.tts.sample_rate
        self.label = cfg.label
        self.timed = False

    def synthesize(self, text: str) -> Synthesis:
        # The noise seed is a hash of the text, so the same turn sounds the same in any process.
        audio = self.tts(text, speed=self.speed, seed=zlib.crc32(text.encode("utf-8")))
        return Synthesis(np.asarray(audio, np.float32), self.sample_rate, [(None, None)] * len(spoken_tokens(text)))

"""hibari: a small neural voice (bundled female US voice `heart`, 24 kHz) with no alignment API.

Its spans are unknown (its spec says `timed=False`): the speak step times its words with the Whisper
aligner. Only the bundled voice is allowed, because hibari downloads any other voice on first
use and nothing may be downloaded at run time.
"""

from __future__ import annotations

import zlib

import numpy as np

from kame_data.speech.engine_spec import EngineCheck, EngineSpec, Tempo
from kame_data.speech.synthesis import Synthesis
from kame_data.text import spoken_tokens


class HibariEngine:
    def __init__(self, voice: str, threads: int | None = None, *, speed: float):
        try:
            from hibari import Hibari
            from hibari.voices import VOICES, voice_path
        except ImportError as e:
            raise RuntimeError("hibari voices need `pip install hibari-tts` (kame-data[tts])") from e
        if voice not in VOICES:
            raise RuntimeError(f"hibari has no voice {voice!r}; the bundled one is 'heart'")
        try:
            model = voice_path(voice, download_missing=False)
        except FileNotFoundError as e:
            raise RuntimeError(f"hibari voice {voice!r} is not bundled and would be downloaded; "
                               "use 'heart' (or copy the voice file into hibari's cache by hand)") from e
        self.tts = Hibari(voice=voice, model=model, threads=threads or 1)
        self.speed = speed
        self.sample_rate = self.tts.sample_rate

    def synthesize(self, text: str) -> Synthesis:
        # The noise seed is a hash of the text, so the same turn sounds the same in any process.
        audio = self.tts(text, speed=self.speed, seed=zlib.crc32(text.encode("utf-8")))
        return Synthesis(np.asarray(audio, np.float32), self.sample_rate, [(None, None)] * len(spoken_tokens(text)))


SPEC = EngineSpec(
    name="hibari", loader=HibariEngine, knobs=("speed",), timed=False, tempo=Tempo("speed"),
    words_per_second=2.7,  # taken as piper's: no separate measurement
    check=EngineCheck("hibari", ("hibari-tts",), "install the speech extra: pip install 'kame-data[tts]' "
                      "(hibari-tts); only its bundled voice works offline", voice="heart"),
)

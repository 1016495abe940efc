"""What an engine module declares about its engine, so that no caller has to know engines by name.

Each engine module (piper_engine.py, espeak_engine.py, hibari_engine.py, kokoro_engine.py,
flite_engine.py, coqui_engine.py) ends with
one `EngineSpec`; speech/engines.py collects them into the table that the voice config, the
renderer, `kame-data doctor` and `kame-data plan` read. Adding an engine is one module plus its
line in that table.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from kame_data.speech.synthesis import TTSEngine


@dataclass(frozen=True)
class Tempo:
    """The knob that sets how fast an engine speaks, and which way it turns."""

    knob: str
    inverse: bool = False  # True: a larger value speaks slower (a duration scale)
    whole: bool = False  # the knob takes whole numbers (words a minute)

    def faster(self, value: float, factor: float) -> float:
        """The knob's value for speech about `factor` times faster."""
        scaled = value / factor if self.inverse else value * factor
        return int(round(scaled)) if self.whole else round(scaled, 3)

    def speed(self, value: float, default: float, words_per_second: float) -> float:
        """Words per second at `value`, from the rate at the knob's default (a zero value counts as
        the default). Multiplied before dividing, so a rate and a default that are exact give the
        correctly rounded quotient."""
        value = value or default
        return words_per_second * default / value if self.inverse else words_per_second * value / default


@dataclass(frozen=True)
class EngineCheck:
    """The row `kame-data doctor` gives the engine: it renders a test sentence with `voice` (or the
    voice a recipe gives this engine) in a subprocess."""

    label: str  # the row's name (the package a user knows, e.g. espeak-ng)
    packages: tuple[str, ...]  # distributions whose version the row shows
    advice: str  # what to do when the check fails
    voice: str
    optional: bool = False  # an engine a machine may lack (a system package): missing, it is skipped, not failed
    missing: Callable[[], str | None] | None = None  # why the engine cannot run here (None: it can); cheap, loads nothing


@dataclass(frozen=True)
class EngineSpec:
    """One TTS engine as the rest of kame-data sees it."""

    name: str  # what a recipe writes as a voice's `engine`
    loader: Callable[..., TTSEngine]  # loader(voice, threads, **knobs): loads the model (heavy imports happen here)
    knobs: tuple[str, ...]  # the VoiceConfig fields it reads, passed to the loader by name; a voice's label shows them
    timed: bool  # True: it times its words itself; False: the speak step times them with the Whisper aligner
    tempo: Tempo  # the knob the renderer turns when a turn must be spoken faster
    words_per_second: float  # typical speaking rate at the knobs' defaults (`kame-data plan`)
    check: EngineCheck | None = None  # None: the doctor has no voice to try (user-supplied models only)
    # core-s per audio-s relative to piper's, measured side by side on one idle machine: `kame-data plan`
    # counts an engine the calibration lacks at the calibration's piper rate times this (None: unknown)
    relative_cost: float | None = None
    # speakers(voice): the speakers of a multi-speaker voice, () for one speaker (reads metadata, loads no model)
    speakers: Callable[[str], tuple[str, ...]] | None = None
    # identity(voice): what names the voice's model files (a hash), so cached figures follow a replaced file
    identity: Callable[[str], str] | None = None
    # the speed probe's kind whose ratio carries its rate to another CPU (kame_data/plan/speed_probe.py):
    # "tts" (piper's ONNX network) for neural engines, "general" for compiled code such as espeak-ng
    probe: str = "tts"
    # how the engine module turns text into audio, where it changes without a package's version changing:
    # bumped with such a change, it is part of the speak step's checkpoint key (0: not tracked)
    sound_version: int = 0


class ProcessLibrary:
    """A native library loaded once per process (espeak-ng, libflite through ctypes): `get()` builds the
    one instance under the subclass's own `lock`, which also serialises its calls."""

    lock: threading.Lock
    _instance: "ProcessLibrary | None" = None

    @classmethod
    def get(cls):
        with cls.lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

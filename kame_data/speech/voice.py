"""One voice: an engine, its voice name and knobs; its label, a faster copy of it, and the engine
that speaks it.

What a voice means for its engine (which knobs it reads, whether it times its words, which knob
sets its tempo) comes from the engine table (speech/engines.py), so nothing here names an engine.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, replace
from typing import Annotated, Any, ClassVar, Literal

from kame_data.config_schema import Schema
from kame_data.speech.engine_spec import EngineSpec
from kame_data.speech.engines import DEFAULT_ENGINE, ENGINES, engine_spec, knobs_of
from kame_data.speech.limits import AtLeastZero, Positive
from kame_data.speech.synthesis import TTSEngine
from kame_data.speech.variants import VariantEngine

# Speaker-variant knobs any engine's output takes (Praat's "Change gender", speech/variants.py).
VARIANT_KNOBS = ("formant_shift", "pitch_median", "pitch_range")


@dataclass(frozen=True)
class VoiceConfig:
    """A voice: an engine, its voice name and the engine's knobs (unused knobs are ignored).

    `formant_shift`, `pitch_median` and `pitch_range` make a speaker variant of any voice (a
    different apparent speaker from the same model); `name` gives it a short label; `sex`,
    `accent` and `weight` are casting tags (speech/voices.py) that do not change the sound.
    """

    engine: Annotated[str, Schema(enum=list(ENGINES))] = DEFAULT_ENGINE  # the TTS engine
    voice: str = "joe"  # the engine's voice (kame-data voices list)
    length_scale: Positive = 1.0  # piper: > 1 speaks slower
    noise_scale: AtLeastZero = 0.667  # piper: variation of the voice
    noise_w_scale: AtLeastZero = 0.8  # piper: variation of the word lengths
    rate: Annotated[int, Schema(minimum=80, maximum=450)] = 165  # espeak: words per minute
    pitch: Annotated[int, Schema(minimum=0, maximum=99)] = 50  # espeak: base pitch
    speed: Annotated[float, Schema(minimum=0.5, maximum=2.0)] = 1.0  # hibari, coqui: > 1 speaks faster
    # piper: one speaker of a multi-speaker model (a name in its speaker_id_map, or its number without one); in a
    # recipe, "*" casts every speaker of the model, each its own voice
    speaker: str | int = ""
    # > 1: a shorter vocal tract (brighter, more female); < 1: longer
    formant_shift: Annotated[float, Schema(minimum=0.5, maximum=2.0)] = 1.0
    pitch_median: Annotated[float, Schema(minimum=0, maximum=500)] = 0.0  # Hz; 0 keeps the voice's own
    pitch_range: Annotated[float, Schema(minimum=0, maximum=4)] = 1.0  # scales the pitch excursions around the median
    name: str = ""  # a short label ("joe-deep"); default: engine:voice(knobs)
    sex: Literal["", "female", "male"] = ""  # casting tag
    accent: str = ""  # casting tag
    weight: AtLeastZero = 1.0  # relative chance of being cast (within its pool)

    # A voice mapping gives `engine` (an engine voice) or `name` (a catalogue voice, its tags changed).
    schema_rules: ClassVar[dict[str, Any]] = {"anyOf": [{"required": ["engine"]}, {"required": ["name"]}]}

    def __post_init__(self):
        if not isinstance(self.speaker, str):  # `speaker: 3` in YAML names the same voice as "3"
            object.__setattr__(self, "speaker", str(self.speaker))

    @property
    def label(self) -> str:
        """`name`, else `engine:voice` plus the knobs that differ from their defaults, so variants stay apart."""
        if self.name:
            return self.name
        knobs = [f"{k}={_show(getattr(self, k))}" for k in knobs_of(self.engine) + VARIANT_KNOBS
                 if getattr(self, k) != _default(k)]
        return f"{self.engine}:{self.voice}" + (f"({','.join(knobs)})" if knobs else "")

    @property
    def spec(self) -> EngineSpec:
        return engine_spec(self.engine)

    @property
    def timed(self) -> bool:
        """Whether its engine times the words itself (else the Whisper aligner must)."""
        return self.spec.timed

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


def _show(value) -> str:
    return value if isinstance(value, str) else f"{value:g}"


@functools.cache
def _default(knob: str):
    return next(f.default for f in fields(VoiceConfig) if f.name == knob)


def faster(cfg: VoiceConfig, factor: float) -> VoiceConfig:
    """The same voice speaking about `factor` times faster, through the engine's own tempo knob
    (its label then shows the knob)."""
    tempo = cfg.spec.tempo
    return replace(cfg, **{tempo.knob: tempo.faster(getattr(cfg, tempo.knob), factor)})


def words_per_second(cfg: VoiceConfig, measured: dict[str, float] | None = None) -> float:
    """The voice's typical speaking rate: its engine's at default knobs (`measured`, by engine, where
    the calibration has it, else the engine table's), scaled by its tempo knob."""
    spec = cfg.spec
    knob = spec.tempo.knob
    base = (measured or {}).get(cfg.engine, spec.words_per_second)
    return spec.tempo.speed(getattr(cfg, knob), _default(knob), base)


def open_engine(cfg: VoiceConfig, threads: int | None = None) -> TTSEngine:
    """Load the engine for a voice (model files are loaded here, once per process: variants and
    differently tagged copies of one voice share it). `threads` caps the engine's own thread pool
    (1 inside worker processes)."""
    if cfg.is_variant:
        return VariantEngine(_open_base(cfg.base, threads), cfg.formant_shift, cfg.pitch_median, cfg.pitch_range)
    return _open_base(cfg.sound, threads)


@functools.lru_cache(maxsize=32)
def _open_base(cfg: VoiceConfig, threads: int | None) -> TTSEngine:
    spec = cfg.spec
    return spec.loader(cfg.voice, threads, **{k: getattr(cfg, k) for k in spec.knobs})

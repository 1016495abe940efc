"""What the speech configs do not yet say about themselves: exact types, limits and descriptions.

Every other config class carries these on its own fields (kame_data/config_schema.py says how);
the speech package's classes were being restructured when the recipe schema became generated, so
their notes wait here, keyed "Class.field". Each entry is written as the field will read: move it
onto its field (the type as the annotation, the text as its comment) and delete it here. A field
that already has an end-of-line comment and a precise annotation needs no entry.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from kame_data.config_schema import FieldNote, Schema
from kame_data.records import ASSISTANT, USER
from kame_data.speech.acoustics import MICS, NOISES
from kame_data.speech.config import GapConfig, VoiceConfig
from kame_data.speech.engines import ENGINES

AtLeastZero = Annotated[float, Schema(minimum=0)]
Share = Annotated[float, Schema(minimum=0, maximum=1)]
Range = tuple[AtLeastZero, AtLeastZero]  # [low, high] seconds
Pair = tuple[float, float]
VoiceName = Annotated[str, Schema(minLength=1)]
Voice = VoiceName | VoiceConfig
Gap = Pair | GapConfig
Seconds = AtLeastZero | Range

_VOICE = ("a catalogue voice by name (kame-data voices list), or a mapping: an engine voice, or {name: <catalogue "
          "voice>, ...} to change its tags; or a list of them, a pool from which each dialogue draws one (by a "
          "hash of the seed and its id)")
_GAP = ("[low, high] draws uniformly; a mapping gives the distribution (a histogram comes from kame-data fit-gaps)")


def _n(tp: Any = None, doc: str | None = None) -> FieldNote:
    return FieldNote(tp, doc)


NOTES: dict[str, FieldNote] = {
    # speak
    # a voice
    # gaps between turns
    # pauses inside a turn
    # speech QA, screening, the answer check
    # live turn-taking
    # the quality step
    "QualityConfig.enabled": _n(None, "measure every turn"),
    "QualityConfig.min_dnsmos": _n(Annotated[float, Schema(minimum=1, maximum=5)] | None),
    "QualityConfig.max_speech_outside": _n(AtLeastZero | None),
    "QualityConfig.min_word_speech": _n(Share | None),
    "QualityConfig.max_clipped": _n(Annotated[int, Schema(minimum=0)] | None),
    "QualityConfig.min_lufs": _n(None, "the quietest loudness a turn may have (LUFS); null: off"),
    "QualityConfig.max_lufs": _n(None, "the loudest a turn may be (LUFS); null: off"),
    "QualityConfig.margin": _n(AtLeastZero),
    "QualityConfig.vad_threshold": _n(Annotated[float, Schema(exclusiveMinimum=0, exclusiveMaximum=1)],
                                      "Silero VAD's speech probability threshold"),
    # the acoustics step
    "AcousticsConfig.enabled": _n(None, "simulate the user's room, microphone and noise"),
    "AcousticsConfig.snr_db": _n(Pair, "[low, high] signal-to-noise ratio in dB, drawn uniformly per dialogue"),
    "AcousticsConfig.noise": _n(Annotated[tuple[Literal[NOISES], ...], Schema(minItems=1)]),
    "AcousticsConfig.reverb": _n(Share),
    "AcousticsConfig.rt60": _n(tuple[Annotated[float, Schema(exclusiveMinimum=0)], Annotated[float, Schema(exclusiveMinimum=0)]],
                                "[low, high] reverberation time of the simulated rooms, in seconds"),
    "AcousticsConfig.rooms": _n(Annotated[int, Schema(minimum=1)]),
    "AcousticsConfig.mic": _n(Annotated[tuple[Literal[tuple(MICS)], ...], Schema(minItems=1)],
                              "microphone responses drawn from"),
    "AcousticsConfig.gain_db": _n(Pair, "[low, high] level change of the user channel in dB"),
}

# Rules over several fields of one class (its `schema_rules`, once it can carry them).
RULES: dict[str, dict[str, Any]] = {}

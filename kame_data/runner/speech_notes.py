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
    "SpeakConfig.sample_rate": _n(Literal[24000], "Hz of every rendered dialogue (Mimi's rate)"),
    "SpeakConfig.assistant": _n(Voice | Annotated[tuple[Voice, ...], Schema(minItems=1)], f"The assistant's voice: {_VOICE}."),
    "SpeakConfig.user": _n(Voice | Annotated[tuple[Voice, ...], Schema(minItems=1)], f"The user's voice: {_VOICE}."),
    "SpeakConfig.gap": _n(Gap, f"Seconds from one turn's last word to the next turn's first (negative: overlap): {_GAP}."),
    "SpeakConfig.pauses": _n(None, "pauses inside a turn"),
    "SpeakConfig.lead_in": _n(Seconds, "seconds of silence before the first word: a number, or [low, high]"),
    "SpeakConfig.tail": _n(Seconds, "seconds of silence after the last word: a number, or [low, high]"),
    "SpeakConfig.target_dbfs": _n(Annotated[float, Schema(maximum=0)], "loudness every turn is normalised to, in dBFS"),
    "SpeakConfig.max_turn_seconds": _n(Annotated[float, Schema(exclusiveMinimum=0)], "a longer rendered turn rejects the dialogue"),
    "SpeakConfig.workers": _n(Annotated[int, Schema(minimum=1)] | None, "worker processes (default: one per core)"),
    "SpeakConfig.balance": _n(Literal["", "sex", "accent"], "casting: give each sex (or accent) of a pool the same chance of being cast"),
    "SpeakConfig.qa": _n(None, "Whisper listens to every turn; a voice above either threshold is replaced by the pool's next one, else the dialogue is rejected"),
    "SpeakConfig.screen": _n(None, "before casting, every pool voice reads fixed sentences to Whisper; voices above max_wer (median) are left out"),
    "SpeakConfig.reply": _n(None, "when the assistant answers the user: its gap distribution (default: gap), a gate on its 95th percentile, a per-dialogue limit"),
    "SpeakConfig.turns": _n(None, "live turn-taking: listener backchannels and user barge-ins (off by default)"),
    "SpeakConfig.answer": _n(None, "after mixing, Whisper listens to the assistant channel: the answer must still be heard (else another voice, else answer_lost)"),
    # a voice
    # gaps between turns
    "GapConfig.distribution": _n(Literal["uniform", "normal", "histogram", "inherit"],
                                 "uniform: from [low, high]; normal: N(mean, sd) clipped to [min, max]; histogram: a bin of "
                                 "`edges` by `weights`, then a point inside it; inherit (speak.reply.gap only): as speak.gap"),
    "GapConfig.low": _n(None, "uniform: the shortest gap, in seconds"),
    "GapConfig.high": _n(None, "uniform: the longest gap, in seconds"),
    "GapConfig.mean": _n(None, "normal: the mean gap, in seconds"),
    "GapConfig.sd": _n(AtLeastZero, "normal: the standard deviation, in seconds"),
    "GapConfig.min": _n(Annotated[float, Schema(minimum=-2)], "normal: the shortest gap (negative: an overlap), in seconds"),
    "GapConfig.max": _n(None, "normal: the longest gap, in seconds"),
    "GapConfig.same_speaker_min": _n(AtLeastZero, "two turns of the same speaker are at least this far apart, in seconds"),
    "GapConfig.edges": _n(tuple[float, ...]),
    "GapConfig.weights": _n(tuple[AtLeastZero, ...]),
    "ReplyConfig.gap": _n(Gap, f"the gap before the assistant answers: {_GAP}; default: as speak.gap"),
    "ReplyConfig.max_p95": _n(None, "a gap distribution whose 95th percentile is above this (seconds) is refused"),
    "ReplyConfig.max_seconds": _n(None, "a dialogue whose reply comes later than this (seconds) is rejected (late_reply)"),
    # pauses inside a turn
    "PauseConfig.bound": _n(None, "redraw every pause the oracle's run rule (a word ending 1.0 s or more after the previous one) "
                                  "would read as the end of the turn (false needs oracle.early_truth: keep)"),
    "PauseConfig.sentence": _n(Range, "bound: the range a pause after . ? ! is redrawn from"),
    "PauseConfig.clause": _n(Range, "bound: the range a pause after , ; : is redrawn from"),
    "PauseConfig.word": _n(Range, "bound: the range any other pause is redrawn from"),
    "PauseConfig.margin": _n(Annotated[float, Schema(minimum=0, maximum=0.5)], "bound: seconds the next word ends before the run rule"),
    "PauseConfig.thinking": _n(Share, "probability of one long pause in a user turn (needs oracle.early_truth: keep)"),
    "PauseConfig.thinking_seconds": _n(Range, "the long pause's length"),
    # speech QA, screening, the answer check
    "QAConfig.enabled": _n(None, "check every turn with Whisper"),
    "QAConfig.max_wer": _n(AtLeastZero, "the highest word error rate a turn may have"),
    "QAConfig.max_start_error_ms": _n(Annotated[float, Schema(exclusiveMinimum=0)],
                                      "the largest median gap between our word starts and Whisper's, in ms (engine-timed turns)"),
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

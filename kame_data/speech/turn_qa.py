"""One synthesised turn made ready for mixing: its words timed (the engine's spans, or what Whisper
heard for engines that do not time themselves) and, with QA on, what Whisper measured on it (WER,
word-start error). Apart from the renderer so that what a turn's figures mean is read in one place."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kame_data.costs import piece
from kame_data.speech.config import SpeakConfig
from kame_data.speech.mix import SpokenTurn
from kame_data.speech.timing import complete_spans, cover_voice
from kame_data.speech.voice import VoiceConfig
from kame_data.text import spoken_tokens


@dataclass
class Turn:
    """One rendered turn and what QA measured on it."""

    spoken: SpokenTurn
    wer: float | None = None
    start_error_ms: float | None = None
    long_gaps: list[tuple[int, float]] = field(default_factory=list)  # pauses the run rule reads as its end
    heard: str | None = None  # what Whisper heard (QA), for the answer round-trip when mixing cut nothing


def finish_turn(cfg: SpeakConfig, voice: VoiceConfig, speaker: str, spoken: str, syn, audio: np.ndarray,
                heard: list | None) -> Turn:
    """One synthesised turn timed and, with QA and what Whisper `heard`, checked."""
    timed = voice.timed
    words = [w for w, _ in spoken_tokens(spoken)]
    spans = syn.spans
    lined = None
    if heard is not None:
        from kame_data.speech.whisper import line_up

        with piece("speak.qa", whole_process=True):
            lined = line_up(words, heard)
        if not timed:
            spans = lined.spans
    spans = complete_spans(spans, [len(w) for w in words], syn.audio, syn.sample_rate)
    if not timed:
        spans = cover_voice(spans, syn.audio, syn.sample_rate)
    duration = len(audio) / cfg.sample_rate
    spans = [(min(s, duration), min(e, duration)) for s, e in spans]
    turn = Turn(SpokenTurn(speaker, audio, words, spans, voice.label))
    if heard is not None and cfg.qa.enabled:
        from kame_data.speech.whisper import heard_wer, start_error_ms, transcript

        turn.heard = transcript(heard)
        turn.wer = round(heard_wer(spoken, turn.heard), 4)
        # Whisper timed the aligner's turns itself: comparing them with it would measure nothing.
        err = start_error_ms(spans, lined) if timed else None
        turn.start_error_ms = None if err is None else round(err, 1)
    return turn


def qa_failure(cfg: SpeakConfig, turns: dict[int, Turn]) -> tuple[str, str] | None:
    """(reason code, detail) of the first turn QA rejects; None when all pass or QA is off."""
    if not cfg.qa.enabled:
        return None
    for k, t in turns.items():
        if t.wer is not None and t.wer > cfg.qa.max_wer:
            return "qa_wer", f"turn {k}: WER {t.wer:.2f} > {cfg.qa.max_wer:.2f}"
        if t.start_error_ms is not None and t.start_error_ms > cfg.qa.max_start_error_ms:
            return "qa_timing", (f"turn {k}: word starts {t.start_error_ms:.0f} ms from Whisper's "
                                 f"> {cfg.qa.max_start_error_ms:.0f} ms")
    return None

"""The speak step's worker processes: each loads every voice (and Whisper) once, on one thread, and
renders or screens what the parent sends it. Kept apart from the step so the step reads as what it
does, not how processes are fed."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kame_data.records import Dialogue, Reject, RenderedDialogue
from kame_data.speech.config import SpeakConfig
from kame_data.speech.screen import voice_wer
from kame_data.speech.voice import VoiceConfig

if TYPE_CHECKING:
    from kame_data.speech.stage import SpeakStage

_WORKER: SpeakStage | None = None
_WORKER_ERROR = ""


def init_worker(cfg: SpeakConfig, seed: int, run_gap: float) -> None:
    """Runs once in each worker: loads every voice (and Whisper) on one thread."""
    from kame_data.speech.stage import SpeakStage

    global _WORKER, _WORKER_ERROR
    try:
        stage = SpeakStage(replace(cfg, workers=1), seed, run_gap)
        stage.open_local(threads=1)
        _WORKER = stage
    except Exception as e:  # reported to the parent by the first task, with its message
        _WORKER_ERROR = f"{type(e).__name__}: {e}"


def worker_ready(_: int) -> str:
    return _WORKER_ERROR if _WORKER is None else ""


def _loaded() -> SpeakStage:
    if _WORKER is None:
        raise RuntimeError(f"speak worker could not load its voices: {_WORKER_ERROR}")
    return _WORKER


def render_in_worker(dialogue: Dialogue, dropped: frozenset = frozenset()) -> RenderedDialogue | Reject:
    stage = _loaded()
    stage.dropped = set(dropped)  # the parent screened the voices once
    return stage.render(dialogue)


def stage_voice_wer(stage: SpeakStage, voice: VoiceConfig) -> float:
    """A voice's median WER on the screening sentences, with `stage`'s loaded engines."""
    c = stage.cfg
    return voice_wer(stage.engines[voice], stage.aligner, c.screen.sentences, c.sample_rate, c.target_dbfs)


def screen_in_worker(voice: VoiceConfig) -> float:
    return stage_voice_wer(_loaded(), voice)

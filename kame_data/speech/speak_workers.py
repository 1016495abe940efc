"""The speak step's worker processes: each holds one DialogueRenderer that loads every voice (and
Whisper) once, on one thread, and renders or screens what the parent sends it. Kept apart from the
step so the step reads as what it does, not how processes are fed."""

from __future__ import annotations

from dataclasses import replace

from kame_data import costs
from kame_data.records import Dialogue, Reject, RenderedDialogue
from kame_data.speech.config import SpeakConfig
from kame_data.speech.renderer import DialogueRenderer
from kame_data.speech.voice import VoiceConfig

_RENDERER: DialogueRenderer | None = None
_ERROR = ""


def init_worker(cfg: SpeakConfig, seed: int, run_gap: float, step: str) -> None:
    """Runs once in each worker: loads every voice (and Whisper) on one thread."""
    global _RENDERER, _ERROR
    try:
        renderer = DialogueRenderer(replace(cfg, workers=1), seed, run_gap, step)
        renderer.load(threads=1)
        _RENDERER = renderer
    except Exception as e:  # reported to the parent by the first task, with its message
        _ERROR = f"{type(e).__name__}: {e}"


def worker_ready(_: int) -> str:
    return _ERROR if _RENDERER is None else ""


def _loaded() -> DialogueRenderer:
    if _RENDERER is None:
        raise RuntimeError(f"speak worker could not load its voices: {_ERROR}")
    return _RENDERER


def render_in_worker(dialogue: Dialogue, dropped: frozenset = frozenset()) -> RenderedDialogue | Reject:
    renderer = _loaded()
    renderer.dropped = set(dropped)  # the parent screened the voices once
    try:
        return renderer.render(dialogue)
    finally:
        costs.flush()  # a spawned worker may be stopped without running atexit


def screen_in_worker(voices: list[VoiceConfig]) -> list[float]:
    try:
        return _loaded().voice_wers(voices)
    finally:
        costs.flush()

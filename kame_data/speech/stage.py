"""The speak step: dialogues in, rendered dialogues (or rejects) out, the same for any number of
worker processes.

What one dialogue becomes is the DialogueRenderer's business (speech/renderer.py). The step owns
what is around it: where the renderers live (here when `workers` is 1, else one in each worker
process, with engines on one thread each so the audio does not depend on the number of workers),
screening the pools once before any dialogue is cast, and sending each dialogue to a renderer.
"""

from __future__ import annotations

import logging
import os
import weakref
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from kame_data import accelerator
from kame_data.records import CONTINUATION_GAP, Dialogue, Reject, RenderedDialogue
from kame_data.speech.config import GapConfig, QAConfig, SpeakConfig  # noqa: F401 - the stage's config types
from kame_data.speech.renderer import DialogueRenderer
from kame_data.speech.screen import screen_pools
from kame_data.speech.speak_workers import init_worker, render_in_worker, screen_in_worker, worker_ready
from kame_data.step import Resources, RunContext, Step, StepSpec
from kame_data.workers import EngineCrashed, describe_death, pool_cpu_seconds, worker_pool

log = logging.getLogger(__name__)


class SpeakStage(Step[Dialogue, RenderedDialogue | Reject]):
    """Renders dialogues. Engines load once per process: here when `workers` is 1, else once in
    each worker process."""

    name = "speak"

    def __init__(self, config: SpeakConfig, context: RunContext | None = None):
        super().__init__(config, context)
        self.cfg = config
        # The oracle's run rule (a word ending this long after the previous one ends a run): every
        # pause inside a turn is kept below it (docs/design.md, "Oracle events").
        self.run_gap = CONTINUATION_GAP
        self.workers = max(1, config.workers or os.cpu_count() or 1)
        self._renderer: DialogueRenderer | None = None
        self._executor = None
        self.screened: dict[str, float] = {}  # voice label -> median WER on the screening sentences
        self.dropped: set[str] = set()  # voices screening left out

    def identity(self) -> dict[str, Any]:
        # an engine whose module tracks how it speaks (EngineSpec.sound_version) keys the checkpoints by it
        versions = {v.engine: v.spec.sound_version for v in self.cfg.voices if v.spec.sound_version}
        return {**super().identity(), "run_gap": self.run_gap, **accelerator.identity(),
                **({"engine_sound": versions} if versions else {})}

    @property
    def renderer(self) -> DialogueRenderer:
        """The renderer of this process (built on first use; it loads its voices when it first renders)."""
        if self._renderer is None:
            self._renderer = DialogueRenderer(self.cfg, self.seed, self.run_gap, self.name)
        return self._renderer

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def resources(self) -> Resources:
        # With a pool, several batches may be queued on it at once, so no worker waits for the
        # slowest dialogue of a batch; in-process engines take one batch at a time.
        return Resources(cpus=float(self.workers), concurrent_batches=self.workers if self.workers > 1 else 1)

    def setup(self) -> None:
        if self.workers == 1:
            self.renderer.load()
        else:
            self._start_workers()
        self.screen()

    def _start_workers(self) -> None:
        if self._executor is not None:
            return
        if self._needs_whisper:
            from kame_data.speech.whisper import whisper_model_dir

            whisper_model_dir()  # assemble once here, not racing in every worker
        self._executor = worker_pool(self.workers, init_worker, (self.cfg, self.seed, self.run_gap, self.name))
        weakref.finalize(self, self._executor.shutdown, wait=True, cancel_futures=True)
        try:
            errors = list(self._executor.map(worker_ready, range(self.workers)))
        except BrokenProcessPool:
            raise EngineCrashed(self.engine_names, f"{describe_death(self._executor)} while loading voices") from None
        for error in errors:
            if error:
                self.teardown()
                raise RuntimeError(f"speak worker could not load its voices: {error}")
        log.info("speak: %d worker processes ready", self.workers)

    def teardown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def worker_cpu_seconds(self) -> float | None:
        return pool_cpu_seconds(self._executor)

    # --- fan-out ---------------------------------------------------------------------------

    def run(self, batch: list[Dialogue]) -> list[list[RenderedDialogue | Reject]]:
        """Each dialogue rendered (or rejected), in input order, the same for any number of workers."""
        if self._executor is None:
            return [[self.renderer.render(d)] for d in batch]
        futures = [self._executor.submit(render_in_worker, d, frozenset(self.dropped)) for d in batch]
        try:
            return [[f.result()] for f in futures]
        except BrokenProcessPool:
            crashed = EngineCrashed(self.engine_names, describe_death(self._executor),
                                    [d.id for d, f in zip(batch, futures) if not f.done() or f.exception()])
            self.teardown()
            raise crashed from None

    @property
    def _needs_whisper(self) -> bool:
        return self.cfg.qa.enabled or self.cfg.screen.enabled or self.cfg.answer.enabled \
            or not all(v.timed for v in self.cfg.voices)

    @property
    def engine_names(self) -> str:
        """The native engines a crash of this stage can come from, for error messages."""
        names = sorted({v.engine for v in self.cfg.voices})
        if self._needs_whisper:
            names.append("whisper")
        return "speech engine (" + ", ".join(names) + ")"

    # --- screening -------------------------------------------------------------------------

    def screen(self) -> None:
        """Leave out every pool voice Whisper cannot understand (`speak.screen`), once per stage."""
        if not self.cfg.screen.enabled or self.screened:
            return
        if self._executor is not None:
            self.screened, self.dropped = screen_pools(self.cfg, lambda vs: list(self._executor.map(screen_in_worker, vs)))
        else:
            self.renderer.load()
            self.screened, self.dropped = screen_pools(self.cfg, lambda groups: [self.renderer.voice_wers(g) for g in groups])
            self.renderer.dropped = self.dropped

    def summary(self) -> dict:
        """The manifest's `speak`: screening WERs, and the user pool's speaker figures (the voices
        screening kept) where the voices have been measured (speech/voice_check.py: `kame-data voices check`, or shipped)."""
        from kame_data.speech.voice_check import pool_summary

        out = {"voice_screen": self.screened} if self.screened else {}
        # the pool as cast: screening's left-out voices are not in it
        pool = pool_summary(self.cfg.assistant, [v for v in self.cfg.user if v.label not in self.dropped])
        return out | ({"speaker_pool": pool} if pool else {})


def _doctor(cfg: SpeakConfig) -> dict:
    """A voice of each engine the recipe casts, for `kame-data doctor --recipe` to render."""
    out: dict[str, str] = {}
    for voice in cfg.voices:
        out.setdefault(voice.engine, voice.voice)
    return out


# Core-seconds per second of audio that speaker variants, turn-taking and the answer round-trip
# add to the step (benchmarks/conversation_steps.py, 4 GSM8K dialogues per configuration on a
# 2-core machine shared with other jobs). TTS and Whisper QA themselves are counted per engine from
# the calibration (plan/projection.py).
CORE_S_PER_AUDIO_S = {"variants": 0.067, "turns": 0.033, "answer": 0.133}


def _cost(cfg: SpeakConfig) -> dict[str, float]:
    parts = {"variants": any(v.is_variant for v in cfg.voices), "turns": cfg.turns.enabled,
             "answer": cfg.answer.enabled}
    return {k: CORE_S_PER_AUDIO_S[k] for k, on in parts.items() if on}


SPEC = StepSpec(SpeakStage, SpeakConfig, order=20, output="rendered.jsonl",
                about="speech: every turn through a voice of its role's pool, timed, checked and mixed to stereo",
                doctor=_doctor, cost=_cost)

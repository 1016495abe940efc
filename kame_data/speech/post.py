"""Two steps after speak: `quality` measures every turn of the clean render (and rejects by the
recipe's thresholds), then `acoustics` puts the user channel in a room with a microphone and noise.

Both are pure functions of the rendered dialogue, their config and the seed. Switched off, each
passes its input through untouched and stores no checkpoint.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from kame_data import accelerator
from kame_data.costs import piece
from kame_data.records import SPEAKER, USER, Reject, RenderedDialogue
from kame_data.speech.acoustics import augment_user
from kame_data.speech.config import AcousticsConfig, QualityConfig
from kame_data.speech.quality import QualityMeter, failure
from kame_data.step import Resources, RunContext, Step, StepSpec

log = logging.getLogger(__name__)


class QualityStage(Step[RenderedDialogue, RenderedDialogue | Reject]):
    """DNSMOS, VAD against the words, clipping and loudness per turn (speech/quality.py)."""

    name = "quality"

    def __init__(self, config: QualityConfig, context: RunContext | None = None):
        super().__init__(config, context)
        self.cfg = config
        self.meter: QualityMeter | None = None

    @property
    def resources(self) -> Resources:
        return Resources(cpus=1.0 if self.cfg.enabled else 0.1, checkpoint=self.cfg.enabled, processes=self.cfg.enabled)

    def identity(self) -> dict:
        return {**super().identity(), **accelerator.identity()}  # DNSMOS's floats on a GPU differ

    def setup(self) -> None:
        if self.cfg.enabled and self.meter is None:
            from threadpoolctl import threadpool_limits

            threadpool_limits(1, user_api="blas")  # the same figures whatever OMP_NUM_THREADS says
            self.meter = QualityMeter(self.cfg)

    def _measure(self, r: RenderedDialogue) -> RenderedDialogue | Reject:
        assert self.meter is not None, "the executor calls setup() before run()"
        figures = self.meter.dialogue(r)
        problem = failure(figures, self.cfg)
        if problem:
            log.info("quality %s: %s", r.id, problem[1])
            return Reject(self.name, r.id, *problem)
        return replace(r, turn_quality=tuple(figures))

    def run(self, batch: list[RenderedDialogue]) -> list[list[RenderedDialogue | Reject]]:
        if not self.cfg.enabled:
            return [[r] for r in batch]
        return [[self._measure(r)] for r in batch]


class AcousticsStage(Step[RenderedDialogue, RenderedDialogue]):
    """Room, microphone, level and noise on the user channel (speech/acoustics.py)."""

    name = "acoustics"

    def __init__(self, config: AcousticsConfig, context: RunContext | None = None):
        super().__init__(config, context)
        self.cfg = config

    @property
    def resources(self) -> Resources:
        return Resources(cpus=1.0 if self.cfg.enabled else 0.1, checkpoint=self.cfg.enabled, processes=self.cfg.enabled)

    def _apply(self, r: RenderedDialogue) -> RenderedDialogue:
        spans = [(w.start, w.end) for w in r.words if w.speaker == SPEAKER[USER]]
        with piece("acoustics"):
            audio, params = augment_user(r.audio, r.sample_rate, spans, self.cfg, self.seed, r.id)
        return replace(r, audio=audio, acoustics=params)

    def run(self, batch: list[RenderedDialogue]) -> list[list[RenderedDialogue]]:
        if not self.cfg.enabled:
            return [[r] for r in batch]
        return [[self._apply(r)] for r in batch]


# Core-seconds per second of audio when switched on (estimates; benchmarks/calibrate.py measures both).
QUALITY_SPEC = StepSpec(QualityStage, QualityConfig, order=30, output="rendered.jsonl",
                        about="per-turn figures of the clean render: DNSMOS, VAD against the words, clipping, loudness",
                        cost=lambda cfg: {QualityStage.name: 0.05} if cfg.enabled else {})
ACOUSTICS_SPEC = StepSpec(AcousticsStage, AcousticsConfig, order=40, output="rendered.jsonl",
                          about="the user's room, microphone and noise on channel 1",
                          cost=lambda cfg: {AcousticsStage.name: 0.025} if cfg.enabled else {})

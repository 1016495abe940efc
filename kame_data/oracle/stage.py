"""The oracle stage: ladder steps -> events with simulator predictions."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kame_data.llm.base import ChatBackend
from kame_data.oracle.ladder import Step, ladder
from kame_data.oracle.prompts import build_request, clean_prediction, usable
from kame_data.records import OracleEvent, Reject, RenderedDialogue, Sample
from kame_data.speech.mix import CHANNEL

log = logging.getLogger(__name__)

TARGETS = {"assistant": CHANNEL["A"], "user": CHANNEL["B"], "both": None}


@dataclass(frozen=True)
class BackendConfig:
    kind: str = "llamacpp"
    model_path: str | None = None
    max_tokens: int = 48
    temperature: float = 0.7
    n_ctx: int = 2048
    threads: int | None = None


@dataclass(frozen=True)
class OracleConfig:
    interval: float = 0.5
    target: str = "assistant"
    retries: int = 2
    backend: BackendConfig = field(default_factory=BackendConfig)


def open_backend(cfg: BackendConfig) -> ChatBackend:
    if cfg.kind == "llamacpp":
        from kame_data.llm.llamacpp import LlamaCppBackend

        return LlamaCppBackend(cfg.model_path, n_ctx=cfg.n_ctx, threads=cfg.threads)
    raise ValueError(f"unknown simulator backend {cfg.kind!r} (available: llamacpp)")


class OracleStage:
    name = "oracle"

    def __init__(self, cfg: OracleConfig, backend: ChatBackend | None = None, cache=None):
        """`backend` overrides the configured one (tests); `cache` is a RequestCache or None."""
        self.cfg = cfg
        self.backend = backend
        self.cache = cache

    def open(self) -> None:
        if self.backend is None:
            from kame_data.llm.cache import CachedBackend

            self.backend = CachedBackend(open_backend(self.cfg.backend), self.cache)

    def _predict(self, steps: list[Step]) -> list[str]:
        """Predictions for steps (level 5: the true reply); '' where every attempt was unusable."""
        b = self.cfg.backend
        preds = [s.true_reply if s.level == 5 else "" for s in steps]
        pending = [i for i, s in enumerate(steps) if s.level < 5]
        for attempt in range(self.cfg.retries + 1):
            if not pending:
                break
            reqs = [build_request(steps[i], b.max_tokens, b.temperature, seed=attempt) for i in pending]
            results = self.backend.complete(reqs)
            still = []
            for i, res in zip(pending, results):
                text = clean_prediction(res.text)
                if usable(text):
                    preds[i] = text
                else:
                    still.append(i)
            pending = still
        return preds

    def process(self, batch: list[RenderedDialogue]) -> list[Sample | Reject]:
        self.open()
        target = TARGETS[self.cfg.target]
        ladders = [ladder(r.words, self.cfg.interval, target, CHANNEL) for r in batch]
        flat = [s for steps in ladders for s in steps]
        preds = iter(self._predict(flat))
        out: list[Sample | Reject] = []
        for rendered, steps in zip(batch, ladders):
            events = []
            for step in steps:
                pred = next(preds)
                if not pred:
                    out.append(Reject(self.name, f"{rendered.id}@{step.timestamp_ms}", "empty_prediction",
                                      f"no usable prediction after {self.cfg.retries + 1} attempts (level {step.level})"))
                    continue
                events.append(OracleEvent(
                    timestamp_ms=step.timestamp_ms, conversation_context=step.conversation_context, prediction=pred,
                    total_word_count=step.total_word_count, trigger_word=step.trigger_word,
                    recent_words=step.recent_words, current_spoken_ratio=step.current_spoken_ratio,
                    channel=step.channel, hint=step.hint, level=step.level))
            if not events:
                out.append(Reject(self.name, rendered.id, "no_oracle_events", "the ladder produced no events"))
                continue
            out.append(Sample(rendered=rendered, oracle=events))
        return out

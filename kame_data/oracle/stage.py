"""The oracle stage: ladder steps -> events with simulator predictions."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kame_data.llm.accounting import Meter, Prices
from kame_data.llm.base import ChatBackend
from kame_data.llm.config import BackendConfig, open_backend
from kame_data.oracle.ladder import CONTINUATION_GAP, Step, ladder
from kame_data.oracle.metrics import early_truth
from kame_data.oracle.prompts import build_request, clean_prediction, usable
from kame_data.records import CHANNEL, OracleEvent, Reject, RenderedDialogue, Sample
from kame_data.step import Resources
from kame_data.step import Step as PipelineStep

log = logging.getLogger(__name__)

TARGETS = {"assistant": CHANNEL["A"], "user": CHANNEL["B"], "both": None}


@dataclass(frozen=True)
class OracleConfig:
    interval: float = 0.5
    target: str = "assistant"
    retries: int = 2  # extra attempts (new seed) for an unusable prediction
    trigger: str = "every_step"  # every_step | new_words (skip steps where no word arrived since the last event)
    level5: str = "hint"  # hint (prediction = true reply, no call) | call (ask the simulator anyway)
    # A level-5 event inside a turn of the speaker being heard hands over the true reply before that
    # speaker has finished: reject the dialogue (default), or keep it (recipes with long pauses).
    early_truth: str = "reject"  # reject | keep
    budget_usd: float | None = None
    backend: BackendConfig = field(default_factory=BackendConfig)

    def __post_init__(self) -> None:
        if self.early_truth not in ("reject", "keep"):
            raise ValueError(f"oracle.early_truth must be reject or keep, not {self.early_truth!r}")

    @property
    def run_gap(self) -> float:
        """The ladder's run rule (DESIGN.md): a word ending this long after the previous one ends a
        speaker's run. The speak step keeps every pause inside a turn below it."""
        return CONTINUATION_GAP


class OracleStage(PipelineStep[RenderedDialogue, Sample | Reject]):
    """Each dialogue's oracle ladder: the reference steps (ladder.py) with a simulator prediction
    per step, as a Sample plus a Reject per dropped event."""

    name = "oracle"

    def __init__(self, config: OracleConfig, backend: ChatBackend | None = None, cache=None):
        """`backend` overrides the configured one (tests); `cache` is a RequestCache or None."""
        super().__init__(config, seed=None)  # the simulator's seeds come from each request
        self.cfg = config
        self.backend = backend
        self.cache = cache
        b = config.backend
        self.meter = Meter(Prices(b.prompt_price_per_million, b.completion_price_per_million), config.budget_usd)

    @property
    def resources(self) -> Resources:
        # A remote service takes requests from several batches at once (its client bounds what is
        # in flight); the embedded model answers in order, one batch at a time.
        remote = self.cfg.backend.kind == "openai"
        return Resources(cpus=0.2 if remote else 1.0, concurrent_batches=8 if remote else 1)

    def setup(self) -> None:
        if self.backend is None:
            from kame_data.llm.cache import CachedBackend

            self.backend = CachedBackend(open_backend(self.cfg.backend, self.meter), self.cache)

    def teardown(self) -> None:
        inner = getattr(self.backend, "inner", None)
        if hasattr(inner, "close"):
            inner.close()

    def summary(self) -> dict:
        return self.backend.summary() if hasattr(self.backend, "summary") else {}

    def run(self, batch: list[RenderedDialogue]) -> list[list[Sample | Reject]]:
        return self.map(batch)

    def _predict(self, steps: list[Step]) -> tuple[list[str], list[str]]:
        """(prediction, error) per step. Level 5 is the true reply unless `level5: call`.

        An unusable answer is asked again with a new seed; a prediction stays '' when every
        attempt was unusable, with error set when the service itself kept failing."""
        b = self.cfg.backend
        direct = self.cfg.level5 == "hint"
        preds = [s.true_reply if (s.level == 5 and direct) else "" for s in steps]
        errors = [""] * len(steps)
        pending = [i for i, s in enumerate(steps) if not (s.level == 5 and direct)]
        for attempt in range(self.cfg.retries + 1):
            if not pending:
                break
            reqs = [build_request(steps[i], b.max_tokens, b.temperature, seed=attempt) for i in pending]
            results = self.backend.complete(reqs)
            still = []
            for i, res in zip(pending, results):
                text = clean_prediction(res.text)
                errors[i] = res.error
                if usable(text):
                    preds[i], errors[i] = text, ""
                else:
                    still.append(i)
            pending = still
        return preds, errors

    def map(self, batch: list[RenderedDialogue]) -> list[list[Sample | Reject]]:
        """Per dialogue: [Sample, event rejects…] or [Reject]. All steps of the batch are sent
        together, so a remote backend overlaps them."""
        self.setup()
        target = TARGETS[self.cfg.target]
        ladders = [ladder(r.words, self.cfg.interval, target, CHANNEL, only_new_words=self.cfg.trigger == "new_words")
                   for r in batch]
        early = [self._early(r, steps) for r, steps in zip(batch, ladders)]
        ladders = [[] if e else steps for e, steps in zip(early, ladders)]  # no calls for a rejected dialogue
        flat = [s for steps in ladders for s in steps]
        preds, errors = self._predict(flat)
        groups: list[list[Sample | Reject]] = []
        offset = 0
        for rendered, steps, reject in zip(batch, ladders, early):
            mine = list(zip(preds[offset: offset + len(steps)], errors[offset: offset + len(steps)]))
            offset += len(steps)
            groups.append([reject] if reject else self._assemble(rendered, steps, mine))
        return groups

    def _early(self, rendered: RenderedDialogue, steps: list[Step]) -> Reject | None:
        """The dialogue's reject when a level-5 step falls inside a turn of the speaker heard
        (unless `early_truth: keep`)."""
        if self.cfg.early_truth == "keep":
            return None
        turns = [{"speaker": t.speaker, "start": tm.start, "end": tm.end}
                 for t, tm in zip(rendered.dialogue.turns, rendered.timings)]
        found = early_truth([{"timestamp_ms": s.timestamp_ms, "level": s.level, "channel": s.channel} for s in steps],
                            turns, CHANNEL)
        if not found:
            return None
        i, k = found[0]
        turn, step = turns[k], steps[i]
        t = step.timestamp_ms / 1000
        to_come = sum(1 for w in rendered.words if w.speaker == turn["speaker"] and t < w.end <= turn["end"]
                      and w.start >= turn["start"])
        why = ("the ladder read a pause as the end of the turn" if step.current_spoken_ratio >= 1 else
               "a turn of over 100 words passes ratio 0.99 before its last word")
        return Reject(self.name, rendered.id, "early_truth",
                      f"{len(found)} level-5 event(s) inside a turn, first at {t:.2f} s in turn {k} "
                      f"({turn['start']:.2f}-{turn['end']:.2f} s): ratio {step.current_spoken_ratio:.3f}, "
                      f"{to_come} word(s) still to come ({why})")

    def _assemble(self, rendered: RenderedDialogue, steps: list[Step], mine: list[tuple[str, str]]):
        failed = [e for _, e in mine if e]
        if failed:
            # The service failed (not the model): reject the dialogue whole, so a rerun redoes it
            # (its successful answers are cached) instead of publishing a ladder with holes.
            return [Reject(self.name, rendered.id, "llm_failed",
                           f"{len(failed)} of {len(steps)} steps failed after retries (last: {failed[-1]})")]
        out: list[Sample | Reject] = []
        events = []
        for step, (pred, _) in zip(steps, mine):
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
            return out + [Reject(self.name, rendered.id, "no_oracle_events", "the ladder produced no events")]
        return [Sample(rendered=rendered, oracle=events)] + out

    def process(self, batch: list[RenderedDialogue]) -> list[Sample | Reject]:
        return [o for group in self.map(batch) for o in group]

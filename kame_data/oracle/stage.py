"""The oracle stage: ladder steps -> events with simulator predictions."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from kame_data.llm.accounting import Account, Meter, Prices
from kame_data.llm.base import REFUSED, ChatBackend
from kame_data.llm.config import backend_spec, open_backend
from kame_data.oracle.config import OracleConfig
from kame_data.oracle.ladder import LadderStep, floor_words, ladder
from kame_data.oracle.metrics import early_truth
from kame_data.oracle.prompts import PROMPT_VERSION, build_request, clue, reply_start
from kame_data.oracle.replies import REPLIES_VERSION, classify, clean_prediction, clue_words_said, repair_cut, usable
from kame_data.oracle.shown import written_forms
from kame_data.records import CHANNEL, OracleEvent, Reject, RenderedDialogue, Sample
from kame_data.scrub import scrub
from kame_data.step import Resources, RunContext, Step, StepSpec

log = logging.getLogger(__name__)

TARGETS = {"assistant": CHANNEL["A"], "user": CHANNEL["B"], "both": None}


class OracleStage(Step[RenderedDialogue, Sample | Reject]):
    """Each dialogue's oracle ladder: the reference steps (ladder.py) with a simulator prediction
    per step, as a Sample plus a Reject per dropped event."""

    name = "oracle"

    def __init__(self, config: OracleConfig, context: RunContext | None = None, backend: ChatBackend | None = None):
        """The context's cache (or None) keeps every answer; its meter is the run's (by default one
        of this step's own with `budget_usd`). `backend` replaces the configured one (tests)."""
        super().__init__(config, context)
        self.cfg = config
        self.backend = backend
        b = config.backend
        meter = self.context.meter
        self.meter = Account(meter if meter is not None else Meter(config.budget_usd),
                             Prices(b.prompt_price_per_million, b.completion_price_per_million))
        self.replies: Counter[str] = Counter()  # attempts by outcome: ok, each non-reply kind, repaired cuts
        self._lock = threading.Lock()

    @property
    def resources(self) -> Resources:
        # A remote service takes requests from several batches at once (its client bounds what is
        # in flight). The embedded model answers each dialogue as a chain that starts from the same
        # state (llm/llama_worker.py), so its answers do not depend on scheduling either: one batch
        # per model instance keeps every instance busy through the retry rounds.
        cpus, batches = backend_spec(self.cfg.backend.kind).resources(self.cfg.backend)
        return Resources(cpus=cpus, concurrent_batches=batches)

    def identity(self) -> dict:
        """Checkpoints depend on the prompt text and on what counts as a reply, not only on the config."""
        return {**super().identity(), "prompt_version": PROMPT_VERSION, "replies_version": REPLIES_VERSION}

    def setup(self) -> None:
        if self.backend is None:
            from kame_data.llm.cache import CachedBackend

            self.backend = CachedBackend(open_backend(self.cfg.backend, self.meter), self.context.cache)

    def teardown(self) -> None:
        if self.backend is not None:
            self.backend.close()

    def worker_cpu_seconds(self) -> float | None:
        return self.backend.worker_cpu_seconds() if self.backend is not None else None

    def summary(self) -> dict:
        out = self.backend.summary() if self.backend is not None else {}
        return {**out, "prompt_version": PROMPT_VERSION, "predictions": dict(sorted(self.replies.items()))}

    def run(self, batch: list[RenderedDialogue]) -> list[list[Sample | Reject]]:
        """Per dialogue: [Sample, event rejects…] or [Reject]. All steps of the batch are sent
        together, so a remote backend overlaps them."""
        target = TARGETS[self.cfg.target]
        # The ladder reads the floor: backchannels are in the audio and the words, not on the floor.
        floors = [floor_words(r.words) for r in batch]
        ladders = [ladder(words, self.cfg.interval, target, CHANNEL, only_new_words=self.cfg.trigger == "new_words",
                          written=written_forms(words, r.dialogue.turns)) for r, words in zip(batch, floors)]
        early = [self._early(r, steps) for r, steps in zip(batch, ladders)]
        ladders = [[] if e else steps for e, steps in zip(early, ladders)]  # no calls for a rejected dialogue
        predictions = self._predict(ladders, [r.id for r in batch])
        return [[reject] if reject else self._assemble(rendered, steps, mine)
                for rendered, steps, mine, reject in zip(batch, ladders, predictions, early)]

    def _predict(self, ladders: list[list[LadderStep]], ids: list[str]) -> list[list[tuple[str, str]]]:
        """(prediction, error) per step of each dialogue (`_attempts`).

        A backend without state between requests (a remote service) gets each dialogue's attempts
        on its own, side by side: a dialogue's non-replies are asked again as soon as its answers are
        in, not when the slowest dialogue of the batch is done, so a bounded server's slots stay full
        through the retries. The answers are the same either way (a request's seed is its attempt).
        A backend that keeps state along chains (the embedded model) gets the batch's rounds whole:
        its instances decode them together."""
        live = [d for d, steps in enumerate(ladders) if steps]
        if self.backend.capabilities.chains or len(live) < 2:
            return self._attempts(ladders, ids)
        out: list[list[tuple[str, str]]] = [[] for _ in ladders]
        with ThreadPoolExecutor(len(live), thread_name_prefix="kame-data-oracle-dialogue") as pool:
            for d, mine in zip(live, pool.map(lambda d: self._attempts([ladders[d]], [ids[d]])[0], live)):
                out[d] = mine
        return out

    def _attempts(self, ladders: list[list[LadderStep]], ids: list[str]) -> list[list[tuple[str, str]]]:
        """(prediction, error) per step of each dialogue, in rounds of attempts. Level 5 is the true
        reply unless `level5: call`.

        Each dialogue's steps go out as one chain, in time order (each prompt extends the one
        before it). An answer that is not a reply (replies.classify) is asked again with a new seed,
        up to `retries` times; a prediction stays '' when every attempt failed. A poor reply
        (replies.SOFT: it ignores or contradicts the clue) is asked again too, and stands unless an
        attempt does better: a reply that says at least as many of the clue's words. A step the
        service failed on (after the backend's retries) or refused keeps its error, and its dialogue is asked
        nothing more: it will be a reject (transient, or final `llm_refused`), not a ladder with a
        hole a rerun might fill. Requests carry their dialogue's id, so a remote backend tells one
        dialogue's failures from the service's (llm/health.py)."""
        b = self.cfg.backend
        direct = self.cfg.level5 == "hint"
        prefill = self.backend.capabilities.prefill
        out = [[(s.true_reply, "") if (s.level == 5 and direct) else ("", "") for s in steps] for steps in ladders]
        pending = [[i for i, s in enumerate(steps) if not (s.level == 5 and direct)] for steps in ladders]
        last: dict[tuple[int, int], str] = {}  # the latest non-reply kind of each step still pending
        soft: dict[tuple[int, int], str] = {}  # steps holding a usable but poor reply: its kind (replies.SOFT)
        for attempt in range(self.cfg.retries + 1):
            live = [d for d, p in enumerate(pending) if p]
            if not live:
                break
            seed = 1000 * self.cfg.seed + attempt
            chains = [[build_request(ladders[d][i], b.max_tokens, b.temperature, seed=seed, prefill=prefill, item=ids[d])
                       for i in pending[d]]
                      for d in live]
            answers = self.backend.complete_chains(chains)
            last = {}
            for d, results in zip(live, answers):
                still = []
                for i, res in zip(pending[d], results):
                    text, kind = self._reply(ladders[d][i], res, b.max_tokens)
                    # A failure's detail names its kind first ("timeout (…); its requests failed for …").
                    error = f"{REFUSED}: {res.refusal}" if res.refused else (res.detail or res.error)
                    # The first poor reply stands until a better one comes: neither a later poor reply
                    # nor one that says less of the clue ("That is a clear answer.") is better.
                    poor = soft.get((d, i))
                    if poor and not kind and not error and self._says_less(ladders[d][i], text, out[d][i][0]):
                        kind = poor
                        self._count("said_less_than_kept")
                    if usable(kind) and not (kind and poor):
                        out[d][i] = (text, "")
                        if kind:
                            soft[d, i] = kind
                        else:
                            soft.pop((d, i), None)
                    elif not poor or error:
                        out[d][i] = ("", error)
                    if kind:
                        still.append(i)
                        last[d, i] = kind
                failed = any(out[d][i][1] for i in pending[d])
                pending[d] = [] if failed else still
                if failed:
                    for i in still:
                        last.pop((d, i), None)
        for key, kind in last.items():  # no reply after every attempt: the event keeps a poor one, or is dropped
            self._count(f"kept_{soft[key]}" if key in soft else f"dropped_{kind}")
        return out

    @staticmethod
    def _says_less(step: LadderStep, text: str, kept: str) -> bool:
        """Whether a reply says fewer of the clue's words than the poor reply the step keeps."""
        shown = clue(step.reply_shown, step.level)
        return clue_words_said(text, shown) < clue_words_said(kept, shown)

    def _reply(self, step: LadderStep, res, max_tokens: int) -> tuple[str, str]:
        """(cleaned text, '' or the kind of non-reply); counted for the manifest."""
        text = clean_prediction(res.text)
        shown = clue(step.reply_shown, step.level)
        anchored = self.backend.capabilities.prefill and bool(reply_start(step.reply_shown, step.level))
        truncated = res.completion_tokens >= max_tokens
        if truncated and text:
            repaired = repair_cut(text)
            if repaired and repaired != text and \
                    usable(classify(repaired, step.conversation_context, shown, anchored=anchored)):
                text, truncated = repaired, False
                self._count("cut_repaired")
        kind = (REFUSED if res.refused else "service_error") if res.error else \
            classify(text, step.conversation_context, shown, truncated, anchored)
        self._count(kind or "ok")
        return text, kind

    def _count(self, key: str) -> None:
        with self._lock:
            self.replies[key] += 1

    def _early(self, rendered: RenderedDialogue, steps: list[LadderStep]) -> Reject | None:
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

    def _assemble(self, rendered: RenderedDialogue, steps: list[LadderStep], mine: list[tuple[str, str]]):
        refused = [e.split(": ", 1)[1] for _, e in mine if e.startswith(f"{REFUSED}: ")]
        if refused:
            # The service refused this dialogue's requests (a content filter, a prompt over the
            # context): asking again gets the same answer, so the reject is final (checkpointed).
            return [Reject(self.name, rendered.id, "llm_refused",
                           f"the LLM service refused {len(refused)} of {len(steps)} steps' requests "
                           f"({scrub(refused[-1])})")]
        failed = [e for _, e in mine if e]
        if failed:
            # The service failed (not the model): reject the dialogue whole, so a rerun redoes it
            # (its successful answers are cached) instead of publishing a ladder with holes.
            return [Reject(self.name, rendered.id, "llm_failed",
                           f"{scrub(failed[-1])} ({len(failed)} of {len(steps)} steps without an answer)",
                           transient=True)]
        out: list[Sample | Reject] = []
        events = []
        for step, (pred, _) in zip(steps, mine):
            if not pred:
                out.append(Reject(self.name, f"{rendered.id}@{step.timestamp_ms}", "empty_prediction",
                                  f"no reply among {self.cfg.retries + 1} attempts (level {step.level})"))
                continue
            events.append(OracleEvent(
                timestamp_ms=step.timestamp_ms, conversation_context=step.conversation_context, prediction=pred,
                total_word_count=step.total_word_count, trigger_word=step.trigger_word,
                recent_words=step.recent_words, current_spoken_ratio=step.current_spoken_ratio,
                channel=step.channel, hint=step.hint, level=step.level))
        if not events:
            return out + [Reject(self.name, rendered.id, "no_oracle_events", "the ladder produced no events")]
        return [Sample(rendered=rendered, oracle=events)] + out


def _doctor(cfg: OracleConfig) -> dict:
    """The simulator model `kame-data doctor --recipe` should load (the embedded backend only)."""
    return backend_spec(cfg.backend.kind).doctor(cfg.backend)


SPEC = StepSpec(OracleStage, OracleConfig, order=50, output="samples.jsonl", summary_key="llm",
                about="simulated oracle ladders: a prediction per 0.5 s step from the simulator LLM",
                budget=lambda cfg: cfg.budget_usd, doctor=_doctor)

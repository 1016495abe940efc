"""Any OpenAI-compatible chat service (OpenAI, `vllm serve`, llama.cpp server, …) through the
openai SDK's async client: bounded concurrency, a total deadline per attempt and per item
(`item_deadline`), retries with jittered backoff that honour Retry-After up to `max_retry_after`,
one backend-wide pause for a real rate limit, client-side rate limits, and an abort when the
service, not an item, is down (llm/health.py draws that line).

What a server's error means for the run (docs/concepts/simulator-llm.md):
- 401, 403, 404 or an unknown model: no request can succeed; the run aborts (BackendConfigError).
- 400, 413, 422: the service refused *this* request (a content filter, a prompt over the context):
  the answer is a refusal (ChatResult.error == REFUSED, with the server's scrubbed reason), final
  for its item, never retried nor cached. Only when the service has refused at least
  `max_consecutive_failures` requests, a whole batch among them, without answering a single one is
  it taken for a configuration problem (a parameter it rejects) and the run aborts.
- anything else (429, 5xx, a timeout, a dropped connection, a garbled body): retried; after the
  last retry, or once its item's requests have failed for `item_deadline`, the request fails
  (ChatResult.error says why, `detail` with the server's words) and its item is a transient reject.
  Requests of several items failing with none answered for `outage_after` stop the run.

Every request reserves its worst-case cost on the run's meter before it is sent (waiting while
requests in flight may still free enough) and settles on the answer; a request the budget refuses
is not sent, the batch finishes what is in flight (each answer handed to `on_answer` as it arrives,
so the cache keeps it) and then raises BudgetExceeded."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import os
import threading
import time

from kame_data.llm import activity
from kame_data.llm.accounting import OK, WAIT, Account, BudgetExceeded, prompt_token_bound
from kame_data.llm.base import REFUSED, AnswerHook, Capabilities, ChatBackend, ChatRequest, ChatResult
from kame_data.llm.health import ServiceHealth, Trouble, outage_items_for
from kame_data.llm.limits import PriorityGate, RateLimiter, backoff_delay
from kame_data.llm.service_errors import REFUSAL, BackendConfigError, attempt_failure, secs
from kame_data.scrub import register_secret

log = logging.getLogger(__name__)

BUDGET = "budget"  # the error of a request the budget refused (never sent)
_RESERVE_POLL = 0.02  # seconds between tries to reserve while other requests are in flight
LONG_WAIT_S = 10.0  # a wait before a retry at least this long is announced with a warning line


class OpenAIBackend(ChatBackend):
    name = "openai"
    capabilities = Capabilities(streams=True)  # `complete` calls `on_answer` as each answer arrives

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 concurrency: int = 32, timeout: float = 30.0, max_retries: int = 6, backoff_base: float = 0.5,
                 backoff_max: float = 30.0, rpm: float | None = None, tpm: float | None = None,
                 max_consecutive_failures: int = 50, meter: Account | None = None, max_retry_after: float = 60.0,
                 item_deadline: float = 180.0, outage_after: float = 300.0):
        """`timeout`: the most one attempt may take, connecting and reading the whole answer;
        `max_retry_after`: the longest a server's Retry-After is obeyed (a longer one waits this
        long, counted); `item_deadline`: the most one item's requests together spend failing
        (attempts and waits) before it gives up; `outage_after`: seconds without an answer, while
        several items' requests fail, that stop the run; `max_consecutive_failures`: refusals
        without a single answer that make a configuration error; `meter`: this stage's account
        on the run's meter (prices, budget); a free, unbounded one by default."""
        try:
            import openai  # noqa: F401
        except ImportError as e:
            raise RuntimeError("the openai backend needs `pip install openai`") from e
        self.model = model
        self.base_url = base_url
        key = os.environ.get(api_key_env)
        if not key and base_url is None:
            raise BackendConfigError(f"the openai backend needs an API key in the environment variable {api_key_env}")
        self._api_key = key or "not-needed"  # local servers accept any key; never logged
        register_secret(key)  # and scrubbed from any error text a server echoes it in
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base, self.backoff_max = backoff_base, backoff_max
        self.rpm, self.tpm = rpm, tpm
        self.max_consecutive_failures = max_consecutive_failures
        self.max_retry_after = max_retry_after
        self.item_deadline, self.outage_after = item_deadline, outage_after
        self.health = ServiceHealth(item_deadline, outage_after, outage_items_for(concurrency),
                                    base_url or "the OpenAI API")
        self.meter = meter or Account()
        # For the manifest (touched on the event loop's thread only):
        self.failures = 0  # failed attempts in total
        self.answered = 0  # requests answered
        self.refused = 0  # requests the service refused (final for their item)
        self._last_refusal = ""
        self.retry_wait_s = 0.0  # seconds waited before retries, summed over requests
        self.retry_after_capped = 0  # Retry-After values over max_retry_after (each waited max_retry_after)
        self.gave_up: dict[str, int] = {}  # items whose requests gave up, by their last failure
        self._announced_until = 0.0  # the end (monotonic) of the longest wait a warning has announced
        self._probe: asyncio.Event | None = None  # set while the first request after a pause is out
        self._pause_announced = False
        self._pause_reason = ""
        self._paused_at_announce = 0.0
        self._calls = 0  # calls of `complete`: requests without an item are one item per call
        self._rank: dict[str, int] = {}  # item -> the order it was first seen in (a few bytes a dialogue)
        self._budget_queue: list[tuple[tuple, int]] = []  # requests waiting for budget, earliest dialogue first
        self._budget_order = itertools.count()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None  # started on first use, on its own thread

    def complete(self, requests: list[ChatRequest], on_answer: AnswerHook | None = None) -> list[ChatResult]:
        """Thread-safe: batches from several threads share one event loop, one connection pool,
        one `concurrency` window and one rate limiter, so the service never idles between batches.

        `on_answer(index, result)` is called for each request as it finishes (answered, or failed
        after its retries), before the batch is done. Raises BudgetExceeded after the batch when
        the budget refused any of its requests."""
        if not requests:
            return []
        loop = self._start()
        results = asyncio.run_coroutine_threadsafe(self._complete_all(requests, on_answer), loop).result()
        if not self.answered and self.refused >= self.max_consecutive_failures:
            # Refusals come back faster than answers: judged once the batch is done, not before.
            raise BackendConfigError(f"{self.base_url or 'the OpenAI API'} refused all of the first {self.refused} "
                                     f"requests and answered none (last: {self._last_refusal}); check the model "
                                     "and backend settings (or raise max_consecutive_failures if only some "
                                     "items are refused)")
        if any(r.error == BUDGET for r in results):
            raise BudgetExceeded(self.meter.stop_reason())
        return results

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, daemon=True, name="kame-data-openai").start()
                asyncio.run_coroutine_threadsafe(self._open(), loop).result()
                self._loop = loop
            return self._loop

    async def _open(self) -> None:
        from openai import AsyncOpenAI

        self._client = AsyncOpenAI(api_key=self._api_key, base_url=self.base_url, timeout=self.timeout,
                                   max_retries=0)
        self._gate = PriorityGate(self.concurrency)
        self._limiter = RateLimiter(self.rpm, self.tpm)

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            asyncio.run_coroutine_threadsafe(self._client.close(), loop).result()
            loop.call_soon_threadsafe(loop.stop)

    async def _complete_all(self, requests: list[ChatRequest], on_answer: AnswerHook | None) -> list[ChatResult]:
        self._calls += 1
        items = [r.item or f"call-{self._calls}" for r in requests]
        for item in set(items):
            self.health.open(item)
        # Items seen first are admitted first (limits.PriorityGate), their retry rounds included.
        # Requests without an item rank as new each call, without a lasting entry.
        ranks = [self._rank.setdefault(item, len(self._rank)) if r.item else len(self._rank)
                 for r, item in zip(requests, items)]
        tasks = [asyncio.ensure_future(self._one(i, r, item, on_answer, (rank, i)))
                 for i, (r, item, rank) in enumerate(zip(requests, items, ranks))]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            for item in set(items):
                trouble = self.health.close(item)
                if trouble is not None:
                    if trouble.gave_up:
                        self.gave_up[trouble.error] = self.gave_up.get(trouble.error, 0) + 1
                    activity.report(activity.ItemSettled(item))

    async def _reserve(self, nano: int, priority: tuple = ()) -> bool:
        """Hold `nano` on the meter; False when the budget is spent. While requests wait for budget
        to free up, the one of the earliest dialogue goes first (as at the gate): a run near its
        budget finishes the dialogues it began first instead of paying a little for each."""
        if not self._budget_queue:
            verdict = self.meter.reserve(nano)
            if verdict != WAIT:
                return verdict == OK
        entry = (priority, next(self._budget_order))
        heapq.heappush(self._budget_queue, entry)
        try:
            while True:
                if self._budget_queue[0] == entry:
                    verdict = self.meter.reserve(nano)
                    if verdict != WAIT:
                        return verdict == OK
                await asyncio.sleep(_RESERVE_POLL)  # requests in flight may settle below their reservation
        finally:
            self._budget_queue.remove(entry)
            heapq.heapify(self._budget_queue)

    async def _one(self, index: int, req: ChatRequest, item: str, on_answer: AnswerHook | None,
                   priority: tuple) -> ChatResult:
        result = await self._attempts(self._client, self._limiter, self._gate, req, item, priority)
        if on_answer is not None and result.error != BUDGET:
            try:
                on_answer(index, result)
            except Exception:  # noqa: BLE001 - a cache that cannot write must not lose the batch
                log.exception("storing an answer failed")
        return result

    async def _attempts(self, client, limiter: RateLimiter, gate: PriorityGate, req: ChatRequest,
                        item: str, priority: tuple = ()) -> ChatResult:
        """Attempts until an answer, a refusal, the last retry, or the item's deadline
        (llm/health.py says whose fault a failure is); a 429 during a backend-wide pause is the
        backend's and costs the request no retry."""
        health = self.health
        estimate = sum(len(c) for _, c in req.messages) // 4 + req.max_tokens
        worst = self.meter.worst_case(prompt_token_bound(req.messages), req.max_tokens)
        attempt = 0
        while True:
            retry_after, said, started = None, "", 0.0
            async with gate.slot(priority):
                probe = await self._admit()
                try:
                    health.check()  # checked once in the window: the item or the service may be done for meanwhile
                    if (given := health.given_up(item)) is not None:
                        return self._failed_result(given)
                    left = health.left(item)
                    if left <= 0:
                        return self._failed_result(health.give_up(item, self._past_deadline()))
                    if not await self._reserve(worst, priority):
                        return ChatResult(text="", error=BUDGET)
                    settled = False
                    try:
                        await limiter.acquire(estimate)
                        started = time.monotonic()
                        # The deadline covers the whole attempt (connect, send, the whole body): the
                        # client's own timeout applies per read, which a trickling server never trips.
                        resp = await asyncio.wait_for(client.chat.completions.create(
                            model=self.model, messages=req.as_openai_messages(), max_tokens=req.max_tokens,
                            temperature=req.temperature, **({} if req.seed is None else {"seed": req.seed})),
                            min(self.timeout, left))
                        text = resp.choices[0].message.content or ""
                        usage = resp.usage
                        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
                        ct = int(getattr(usage, "completion_tokens", 0) or 0)
                        self.meter.settle(worst, pt, ct, reported=usage is not None)
                        settled = True
                        self.answered += 1
                        self._service_answered(item)
                        return ChatResult(text=text, prompt_tokens=pt, completion_tokens=ct)
                    except Exception as e:  # noqa: BLE001 - attempt_failure re-raises what is not the service's
                        failure = attempt_failure(e, self.base_url or "the OpenAI API", min(self.timeout, left))
                        if failure.kind == REFUSAL:
                            self._service_answered(item)
                            return self._refusal(failure.said)
                        kind, said, retry_after = failure.kind, failure.said, failure.retry_after
                    finally:
                        if not settled:
                            self.meter.release(worst)  # no answer, nothing billed (also when cancelled)
                finally:
                    if probe:
                        self._probe_done()
            self.failures += 1
            paused = health.failed(item, kind, said, started or time.monotonic(), retry_after, self.max_retry_after)
            if paused:
                self._announce_pause(health, retry_after)
                continue  # the backend waits out the pause; the request does not count it as a retry
            if probe and health.pausing:
                self._resume(f"the first request after the pause failed otherwise ({kind})")
            attempt += 1
            if attempt > self.max_retries:
                log.warning("request failed after %d attempts (%s)", attempt, kind)
                return self._failed_result(health.give_up(item, f"{attempt} attempts failed"))
            obeyed = None if retry_after is None else min(retry_after, self.max_retry_after)
            delay = backoff_delay(attempt - 1, self.backoff_base, self.backoff_max, obeyed)
            left = health.left(item)
            if retry_after is not None and retry_after > left:
                return self._failed_result(health.give_up(
                    item, f"the server asked to wait {secs(retry_after)}, past the {secs(max(0.0, left))} left "
                          f"of item_deadline ({secs(self.item_deadline)})"))
            if delay >= left:
                return self._failed_result(health.give_up(item, self._past_deadline()))
            await self._wait(attempt - 1, kind, retry_after, delay, item, said)

    def _past_deadline(self) -> str:
        return f"its requests failed for item_deadline ({secs(self.item_deadline)})"

    def _failed_result(self, trouble: Trouble) -> ChatResult:
        return ChatResult(text="", error=trouble.error or "failed", detail=trouble.gave_up)

    def _service_answered(self, item: str) -> None:
        was_waiting = self.health.trouble(item) is not None
        if self.health.answered(item):
            self._resume("answered again")
        if was_waiting:
            activity.report(activity.ItemSettled(item))

    async def _admit(self) -> bool:
        """Wait out a backend-wide pause; True when this request is the probe that goes first
        after it (the others wait for its answer)."""
        health = self.health
        while True:
            wait = health.pause_left()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            if not health.pausing:
                return False
            if self._probe is None:
                self._probe = asyncio.Event()
                return True
            await self._probe.wait()

    def _probe_done(self) -> None:
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.set()

    def _announce_pause(self, health: ServiceHealth, retry_after: float | None) -> None:
        """One warning line when a pause begins (a probe that meets the limit again extends it quietly)."""
        until = time.time() + health.pause_left()
        if self._pause_announced:
            activity.report(activity.Paused(until, self._pause_reason))
            return
        self._pause_announced = True
        asked = secs(retry_after or 0.0)
        self._pause_reason = f"rate limited (HTTP 429, Retry-After {asked})"
        log.warning("LLM server %s is rate limiting (HTTP 429 with Retry-After %s for requests of several "
                    "dialogues): pausing every request to it for %s, then one goes first and the rest follow "
                    "once it is answered", self.base_url or "the OpenAI API", asked, secs(health.pause_left()))
        activity.report(activity.Paused(until, self._pause_reason))

    def _resume(self, why: str) -> None:
        self.health.end_pause()
        if self._pause_announced:
            self._pause_announced = False
            log.warning("LLM server %s: sending resumed after %s of pause (%s)", self.base_url or "the OpenAI API",
                        secs(self.health.paused_total() - self._paused_at_announce), why)
            self._paused_at_announce = self.health.paused_total()
            activity.report(activity.Paused(0.0, ""))

    def _refusal(self, said: str) -> ChatResult:
        """The service refused this request: final for its item (unless it refuses every one:
        `complete` judges that when the batch is done)."""
        self.refused += 1
        self._last_refusal = said
        log.info("the LLM service refused a request (%s)", said)
        return ChatResult(text="", error=REFUSED, refusal=said)

    async def _wait(self, attempt: int, error: str, retry_after: float | None, delay: float, item: str,
                    said: str) -> None:
        """Sleep `delay` before the next attempt (jittered backoff, or the server's Retry-After up
        to `max_retry_after`); counted, reported to the run's progress, and announced when long."""
        capped = retry_after is not None and retry_after > self.max_retry_after
        self.retry_wait_s += delay
        self.retry_after_capped += capped
        if capped or delay >= LONG_WAIT_S:
            self._announce(attempt, error, delay, retry_after, capped)
        activity.report(activity.Retry(error, delay, retry_after, capped, item=item, detail=said))
        await asyncio.sleep(delay)

    def _announce(self, attempt: int, error: str, delay: float, asked: float | None, capped: bool) -> None:
        """One warning line per long wait (requests that wait at the same time share it)."""
        until = time.monotonic() + delay
        if until <= self._announced_until + 1.0:
            return
        self._announced_until = until
        then = f"then retrying (attempt {attempt + 2} of {self.max_retries + 1})"
        where = self.base_url or "the OpenAI API"
        if capped:
            log.warning("LLM server %s asked to wait %s (Retry-After); waiting %s (max_retry_after), %s",
                        where, secs(asked), secs(delay), then)
        elif asked is not None:
            log.warning("LLM server %s asked to wait %s (Retry-After); waiting %s, %s", where, secs(asked),
                        secs(delay), then)
        else:
            log.warning("LLM request to %s failed (%s); waiting %s, %s", where, error, secs(delay), then)

    def summary(self) -> dict:
        """For the manifest's `llm` section: failed attempts, refusals and the waits before retries."""
        out = {**self.meter.summary(), "failed_attempts": self.failures, "refused": self.refused,
               "retry_wait_s": round(self.retry_wait_s, 3), "retry_after_capped": self.retry_after_capped}
        if self.gave_up:
            out["items_gave_up"] = dict(sorted(self.gave_up.items()))
        if self.health.pauses:
            out["rate_limit_pauses"] = self.health.pauses
            out["rate_limit_paused_s"] = round(self.health.paused_total(), 3)
        return out

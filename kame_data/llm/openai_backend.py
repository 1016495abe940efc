"""Any OpenAI-compatible chat service (OpenAI, `vllm serve`, llama.cpp server, …) through the
openai SDK's async client: bounded concurrency, a total deadline per attempt, retries with jittered
backoff that honour Retry-After up to `max_retry_after`, client-side rate limits, and an abort after
a streak of failures.

What a server's error means for the run (README.md, "Simulator LLM"):
- 401, 403, 404 or an unknown model: no request can succeed; the run aborts (BackendConfigError).
- 400, 413, 422: the service refused *this* request (a content filter, a prompt over the context):
  the answer is a refusal (ChatResult.error == REFUSED, with the server's scrubbed reason), final
  for its item, never retried nor cached. Only when the service has refused at least
  `max_consecutive_failures` requests, a whole batch among them, without answering a single one is
  it taken for a configuration problem (a parameter it rejects) and the run aborts.
- anything else (429, 5xx, a timeout, a dropped connection, a garbled body): retried; after the
  last retry the request fails (ChatResult.error says why) and its item is a transient reject.

Every request reserves its worst-case cost on the run's meter before it is sent (waiting while
requests in flight may still free enough) and settles on the answer; a request the budget refuses
is not sent, the batch finishes what is in flight (each answer handed to `on_answer` as it arrives,
so the cache keeps it) and then raises BudgetExceeded."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
import time

from kame_data.errors import RunAbort
from kame_data.llm import activity
from kame_data.llm.accounting import OK, STOP, Account, BudgetExceeded, prompt_token_bound
from kame_data.llm.base import REFUSED, AnswerHook, Capabilities, ChatBackend, ChatRequest, ChatResult
from kame_data.llm.limits import (
    BackendUnavailable,
    RateLimiter,
    backoff_delay,
    parse_retry_after,
)
from kame_data.scrub import register_secret, scrub

log = logging.getLogger(__name__)

BUDGET = "budget"  # the error of a request the budget refused (never sent)
_RESERVE_POLL = 0.02  # seconds between tries to reserve while other requests are in flight
LONG_WAIT_S = 10.0  # a wait before a retry at least this long is announced with a warning line
REFUSAL_STATUS = frozenset({400, 413, 422})  # the service refused this request, not every request
CONFIG_STATUS = frozenset({401, 403, 404})  # no request can succeed: bad key, no access, wrong model or URL
_MODEL_MISSING = re.compile(r"(?i)model_not_found|unknown model|\bmodel\b.{0,80}?\b(?:does not exist|not found)")
_REASON_CHARS = 300




class BackendConfigError(RunAbort):
    """The service refused the request for a reason retrying cannot fix (bad key, unknown model)."""


def _reason(e: Exception) -> str:
    """The server's own message for an error, scrubbed of secrets, on one line, cut short."""
    body = getattr(e, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    text = " ".join(scrub(message if isinstance(message, str) and message else getattr(e, "message", e)).split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def _secs(x: float) -> str:
    return f"{x:.0f} s" if x >= 10 else f"{x:.1f} s"


class OpenAIBackend(ChatBackend):
    name = "openai"
    capabilities = Capabilities(streams=True)  # `complete` calls `on_answer` as each answer arrives

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 concurrency: int = 32, timeout: float = 30.0, max_retries: int = 6, backoff_base: float = 0.5,
                 backoff_max: float = 30.0, rpm: float | None = None, tpm: float | None = None,
                 max_consecutive_failures: int = 50, meter: Account | None = None, max_retry_after: float = 60.0):
        """`timeout`: the most one attempt may take, connecting and reading the whole answer;
        `max_retry_after`: the longest a server's Retry-After is obeyed (a longer one waits this
        long, counted); `meter`: this stage's account on the run's meter (prices, budget); a free,
        unbounded one by default."""
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
        self.meter = meter or Account()
        # For the manifest (touched on the event loop's thread only):
        self.failures = 0  # failed attempts in total
        self.answered = 0  # requests answered
        self.refused = 0  # requests the service refused (final for their item)
        self._last_refusal = ""
        self.retry_wait_s = 0.0  # seconds waited before retries, summed over requests
        self.retry_after_capped = 0  # Retry-After values over max_retry_after (each waited max_retry_after)
        self._streak = 0
        self._announced_until = 0.0  # the end (monotonic) of the longest wait a warning has announced
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
        self._gate = asyncio.Semaphore(self.concurrency)
        self._limiter = RateLimiter(self.rpm, self.tpm)

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            asyncio.run_coroutine_threadsafe(self._client.close(), loop).result()
            loop.call_soon_threadsafe(loop.stop)

    async def _complete_all(self, requests: list[ChatRequest], on_answer: AnswerHook | None) -> list[ChatResult]:
        tasks = [asyncio.ensure_future(self._one(i, r, on_answer)) for i, r in enumerate(requests)]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _reserve(self, nano: int) -> bool:
        """Hold `nano` on the meter; False when the budget is spent."""
        while True:
            verdict = self.meter.reserve(nano)
            if verdict == OK:
                return True
            if verdict == STOP:
                return False
            await asyncio.sleep(_RESERVE_POLL)  # requests in flight may settle below their reservation

    async def _one(self, index: int, req: ChatRequest, on_answer: AnswerHook | None) -> ChatResult:
        result = await self._attempts(self._client, self._limiter, self._gate, req)
        if on_answer is not None and result.error != BUDGET:
            try:
                on_answer(index, result)
            except Exception:  # noqa: BLE001 - a cache that cannot write must not lose the batch
                log.exception("storing an answer failed")
        return result

    async def _attempts(self, client, limiter: RateLimiter, gate: asyncio.Semaphore, req: ChatRequest) -> ChatResult:
        import openai

        estimate = sum(len(c) for _, c in req.messages) // 4 + req.max_tokens
        worst = self.meter.worst_case(prompt_token_bound(req.messages), req.max_tokens)
        last_error = ""
        for attempt in range(self.max_retries + 1):
            retry_after = None
            async with gate:
                if not await self._reserve(worst):
                    return ChatResult(text="", error=BUDGET)
                settled = False
                try:
                    await limiter.acquire(estimate)
                    # The deadline covers the whole attempt (connect, send, the whole body): the
                    # client's own timeout applies per read, which a trickling server never trips.
                    resp = await asyncio.wait_for(client.chat.completions.create(
                        model=self.model, messages=req.as_openai_messages(), max_tokens=req.max_tokens,
                        temperature=req.temperature, seed=req.seed), self.timeout)
                    text = resp.choices[0].message.content or ""
                    usage = resp.usage
                    pt = int(getattr(usage, "prompt_tokens", 0) or 0)
                    ct = int(getattr(usage, "completion_tokens", 0) or 0)
                    self.meter.settle(worst, pt, ct, reported=usage is not None)
                    settled = True
                    self._streak = 0
                    self.answered += 1
                    return ChatResult(text=text, prompt_tokens=pt, completion_tokens=ct)
                except openai.APIStatusError as e:
                    if e.status_code in CONFIG_STATUS or _MODEL_MISSING.search(f"{e.code or ''} {_reason(e)}"):
                        raise BackendConfigError(f"{type(e).__name__} (HTTP {e.status_code}) from "
                                                 f"{self.base_url or 'the OpenAI API'}: {_reason(e)}") from None
                    if e.status_code in REFUSAL_STATUS:
                        return self._refusal(e)
                    retry_after = parse_retry_after(e.response.headers.get("retry-after"))
                    last_error = "rate_limited" if e.status_code == 429 else f"http_{e.status_code}"
                except (openai.APITimeoutError, asyncio.TimeoutError):
                    last_error = "timeout"
                except openai.APIConnectionError:
                    last_error = "connection_error"
                except (ValueError, KeyError, TypeError, AttributeError, IndexError, openai.APIError):
                    last_error = "bad_response"  # garbage or truncated body
                finally:
                    if not settled:
                        self.meter.release(worst)  # no answer, nothing billed (also when cancelled)
            self.failures += 1
            self._streak += 1
            if self._streak >= self.max_consecutive_failures:
                raise BackendUnavailable(f"{self._streak} consecutive failed requests to "
                                         f"{self.base_url or 'the OpenAI API'} (last: {last_error}); aborting")
            if attempt < self.max_retries:
                await self._wait(attempt, last_error, retry_after)
        log.warning("request failed after %d attempts (%s)", self.max_retries + 1, last_error)
        return ChatResult(text="", error=last_error)

    def _refusal(self, e) -> ChatResult:
        """The service refused this request: final for its item (unless it refuses every one:
        `complete` judges that when the batch is done)."""
        self._streak = 0  # the service is up and answering
        self.refused += 1
        self._last_refusal = reason = f"HTTP {e.status_code}: {_reason(e)}"
        log.info("the LLM service refused a request (%s)", reason)
        return ChatResult(text="", error=REFUSED, refusal=reason)

    async def _wait(self, attempt: int, error: str, retry_after: float | None) -> None:
        """Sleep before the next attempt: jittered backoff, or the server's Retry-After up to
        `max_retry_after`; counted, reported to the run's progress, and announced when long."""
        capped = retry_after is not None and retry_after > self.max_retry_after
        obeyed = None if retry_after is None else min(retry_after, self.max_retry_after)
        delay = backoff_delay(attempt, self.backoff_base, self.backoff_max, obeyed)
        self.retry_wait_s += delay
        self.retry_after_capped += capped
        if capped or delay >= LONG_WAIT_S:
            self._announce(attempt, error, delay, retry_after, capped)
        activity.report(activity.Retry(error, delay, retry_after, capped))
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
                        where, _secs(asked), _secs(delay), then)
        elif asked is not None:
            log.warning("LLM server %s asked to wait %s (Retry-After); waiting %s, %s", where, _secs(asked),
                        _secs(delay), then)
        else:
            log.warning("LLM request to %s failed (%s); waiting %s, %s", where, error, _secs(delay), then)

    def summary(self) -> dict:
        """For the manifest's `llm` section: failed attempts, refusals and the waits before retries."""
        return {**self.meter.summary(), "failed_attempts": self.failures, "refused": self.refused,
                "retry_wait_s": round(self.retry_wait_s, 3), "retry_after_capped": self.retry_after_capped}

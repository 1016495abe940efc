"""Any OpenAI-compatible chat service (OpenAI, `vllm serve`, llama.cpp server, …) through the
openai SDK's async client: bounded concurrency, timeouts, retries with jittered backoff that
honour Retry-After, client-side rate limits, and an abort after a streak of failures.

Every request reserves its worst-case cost on the run's meter before it is sent (waiting while
requests in flight may still free enough) and settles on the answer; a request the budget refuses
is not sent, the batch finishes what is in flight (each answer handed to `on_answer` as it arrives,
so the cache keeps it) and then raises BudgetExceeded."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Callable

from kame_data.errors import RunAbort
from kame_data.llm.accounting import OK, STOP, Account, BudgetExceeded, prompt_token_bound
from kame_data.llm.base import ChatRequest, ChatResult
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


AnswerHook = Callable[[int, ChatResult], None]


class BackendConfigError(RunAbort):
    """The service refused the request for a reason retrying cannot fix (bad key, unknown model)."""


class OpenAIBackend:
    name = "openai"
    streams_answers = True  # `complete` takes `on_answer`, called as each answer arrives

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 concurrency: int = 32, timeout: float = 30.0, max_retries: int = 6, backoff_base: float = 0.5,
                 backoff_max: float = 30.0, rpm: float | None = None, tpm: float | None = None,
                 max_consecutive_failures: int = 50, meter: Account | None = None):
        """`meter`: this stage's account on the run's meter (prices, budget); a free, unbounded
        one by default."""
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
        self.meter = meter or Account()
        self.failures = 0  # failed attempts in total (for the manifest)
        self._streak = 0
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
                    resp = await client.chat.completions.create(
                        model=self.model, messages=req.as_openai_messages(), max_tokens=req.max_tokens,
                        temperature=req.temperature, seed=req.seed)
                    text = resp.choices[0].message.content or ""
                    usage = resp.usage
                    pt = int(getattr(usage, "prompt_tokens", 0) or 0)
                    ct = int(getattr(usage, "completion_tokens", 0) or 0)
                    self.meter.settle(worst, pt, ct, reported=usage is not None)
                    settled = True
                    self._streak = 0
                    return ChatResult(text=text, prompt_tokens=pt, completion_tokens=ct)
                except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError,
                        openai.BadRequestError) as e:
                    raise BackendConfigError(f"{type(e).__name__} from {self.base_url or 'the OpenAI API'}: "
                                             f"{scrub(getattr(e, 'message', e))}") from None
                except openai.RateLimitError as e:
                    retry_after = parse_retry_after(e.response.headers.get("retry-after"))
                    last_error = "rate_limited"
                except openai.APITimeoutError:
                    last_error = "timeout"
                except openai.APIStatusError as e:
                    last_error = f"http_{e.status_code}"
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
                await asyncio.sleep(backoff_delay(attempt, self.backoff_base, self.backoff_max, retry_after))
        log.warning("request failed after %d attempts (%s)", self.max_retries + 1, last_error)
        return ChatResult(text="", error=last_error)

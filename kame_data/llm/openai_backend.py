"""Any OpenAI-compatible chat service (OpenAI, `vllm serve`, llama.cpp server, …) through the
openai SDK's async client: bounded concurrency, timeouts, retries with jittered backoff that
honour Retry-After, client-side rate limits, and an abort after a streak of failures."""

from __future__ import annotations

import asyncio
import logging
import os
import threading

from kame_data.llm.accounting import Meter
from kame_data.llm.base import ChatRequest, ChatResult
from kame_data.llm.limits import (
    BackendUnavailable,
    RateLimiter,
    backoff_delay,
    parse_retry_after,
)

log = logging.getLogger(__name__)


class BackendConfigError(RuntimeError):
    """The service refused the request for a reason retrying cannot fix (bad key, unknown model)."""


class OpenAIBackend:
    name = "openai"

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 concurrency: int = 32, timeout: float = 30.0, max_retries: int = 6, backoff_base: float = 0.5,
                 backoff_max: float = 30.0, rpm: float | None = None, tpm: float | None = None,
                 max_consecutive_failures: int = 50, meter: Meter | None = None):
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
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base, self.backoff_max = backoff_base, backoff_max
        self.rpm, self.tpm = rpm, tpm
        self.max_consecutive_failures = max_consecutive_failures
        self.meter = meter or Meter()
        self.failures = 0  # failed attempts in total (for the manifest)
        self._streak = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None  # started on first use, on its own thread

    def complete(self, requests: list[ChatRequest]) -> list[ChatResult]:
        """Thread-safe: batches from several threads share one event loop, one connection pool,
        one `concurrency` window and one rate limiter, so the service never idles between batches."""
        if not requests:
            return []
        loop = self._start()
        return asyncio.run_coroutine_threadsafe(self._complete_all(requests), loop).result()

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

    async def _complete_all(self, requests: list[ChatRequest]) -> list[ChatResult]:
        tasks = [asyncio.ensure_future(self._one(self._client, self._limiter, self._gate, r)) for r in requests]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _one(self, client, limiter: RateLimiter, gate: asyncio.Semaphore, req: ChatRequest) -> ChatResult:
        import openai

        estimate = sum(len(c) for _, c in req.messages) // 4 + req.max_tokens
        last_error = ""
        for attempt in range(self.max_retries + 1):
            retry_after = None
            async with gate:
                self.meter.check()
                await limiter.acquire(estimate)
                try:
                    resp = await client.chat.completions.create(
                        model=self.model, messages=req.as_openai_messages(), max_tokens=req.max_tokens,
                        temperature=req.temperature, seed=req.seed)
                    text = resp.choices[0].message.content or ""
                    usage = resp.usage
                    pt = int(getattr(usage, "prompt_tokens", 0) or 0)
                    ct = int(getattr(usage, "completion_tokens", 0) or 0)
                    self.meter.add(pt, ct)
                    self._streak = 0
                    return ChatResult(text=text, prompt_tokens=pt, completion_tokens=ct)
                except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError,
                        openai.BadRequestError) as e:
                    raise BackendConfigError(f"{type(e).__name__} from {self.base_url or 'the OpenAI API'}: "
                                             f"{getattr(e, 'message', e)}") from None
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
            self.failures += 1
            self._streak += 1
            if self._streak >= self.max_consecutive_failures:
                raise BackendUnavailable(f"{self._streak} consecutive failed requests to "
                                         f"{self.base_url or 'the OpenAI API'} (last: {last_error}); aborting")
            if attempt < self.max_retries:
                await asyncio.sleep(backoff_delay(attempt, self.backoff_base, self.backoff_max, retry_after))
        log.warning("request failed after %d attempts (%s)", self.max_retries + 1, last_error)
        return ChatResult(text="", error=last_error)

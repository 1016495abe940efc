"""What a failed attempt at an OpenAI-compatible service means, in one place (docs/concepts/simulator-llm.md,
the page and its "When the LLM service misbehaves"): a configuration no request can pass
(BackendConfigError, the run stops), a refusal of this one request (final for its item), or a
failure worth retrying, named by its kind and the server's own words, scrubbed of secrets."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from kame_data.errors import RunAbort
from kame_data.llm.health import RATE_LIMITED
from kame_data.llm.limits import parse_retry_after
from kame_data.scrub import scrub

REFUSAL_STATUS = frozenset({400, 413, 422})  # the service refused this request, not every request
CONFIG_STATUS = frozenset({401, 403, 404})  # no request can succeed: bad key, no access, wrong model or URL
_MODEL_MISSING = re.compile(r"(?i)model_not_found|unknown model|\bmodel\b.{0,80}?\b(?:does not exist|not found)")
_REASON_CHARS = 300
REFUSAL = "refusal"  # Failure.kind of a request the service refused


class BackendConfigError(RunAbort):
    """The service refused the request for a reason retrying cannot fix (bad key, unknown model)."""


@dataclass(frozen=True)
class Failure:
    kind: str  # rate_limited, http_<status>, timeout, connection_error, bad_response, or REFUSAL
    said: str  # the server's words (or what broke), scrubbed, on one line
    retry_after: float | None = None  # the server's Retry-After, in seconds


def reason(e: BaseException) -> str:
    """The server's own message for an error, scrubbed of secrets, on one line, cut short."""
    body = getattr(e, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    text = " ".join(scrub(message if isinstance(message, str) and message else getattr(e, "message", e)).split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def _transport_reason(e: BaseException) -> str:
    """What broke under the SDK's "Connection error." (a reset, a refused connect), scrubbed."""
    cause = e.__cause__ or e.__context__
    if cause is None:
        return reason(e)
    text = " ".join(scrub(cause).split())
    return f"{type(cause).__name__}: {text}"[:_REASON_CHARS] if text else f"{type(cause).__name__} ({reason(e)})"


def secs(x: float) -> str:
    return f"{x:.0f} s" if x >= 10 else f"{x:.1f} s"


def attempt_failure(e: Exception, where: str, deadline: float) -> Failure:
    """The Failure of an attempt that raised `e` (`deadline`: the seconds it was given). Raises
    BackendConfigError when no request can succeed, and `e` itself when it is not the service's."""
    import openai

    if isinstance(e, openai.APIStatusError):
        if e.status_code in CONFIG_STATUS or _MODEL_MISSING.search(f"{e.code or ''} {reason(e)}"):
            raise BackendConfigError(f"{type(e).__name__} (HTTP {e.status_code}) from {where}: {reason(e)}") from None
        said = f"HTTP {e.status_code}: {reason(e)}"
        if e.status_code in REFUSAL_STATUS:
            return Failure(REFUSAL, said)
        retry_after = parse_retry_after(e.response.headers.get("retry-after"))
        if retry_after is not None:
            said += f" (Retry-After {secs(retry_after)})"
        return Failure(RATE_LIMITED if e.status_code == 429 else f"http_{e.status_code}", said, retry_after)
    if isinstance(e, (openai.APITimeoutError, asyncio.TimeoutError)):
        return Failure("timeout", f"no whole answer within {secs(deadline)}")
    if isinstance(e, openai.APIConnectionError):
        return Failure("connection_error", _transport_reason(e))
    if isinstance(e, (ValueError, KeyError, TypeError, AttributeError, IndexError, openai.APIError)):
        return Failure("bad_response", f"{type(e).__name__}: {reason(e)}")  # garbage or truncated body
    raise e

"""The chat backend interface: batches of requests in, texts and token usage out."""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Callable, ClassVar


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[tuple[str, str], ...]  # (role, content)
    max_tokens: int = 48
    temperature: float = 0.7
    seed: int | None = 0  # None: no seed is sent (an MT-Bench judge request carries FastChat's fields only)
    # The first words of the answer, written for the model (a prefilled reply it continues); only
    # sent to backends with `prefill = True`, and part of the answer they return.
    reply_start: str = ""
    # The item (dialogue, script) the request is for: not part of the request's identity (equal
    # requests of two items are one request), only how a remote backend tells one item's failures
    # from the service's (llm/health.py).
    item: str = field(default="", compare=False)

    def key(self, backend: str, model: str) -> str:
        """Cache key: everything that determines the answer (an empty reply_start is left out, so
        keys of requests without one stay what they were; the item is never in it)."""
        payload = {"backend": backend, "model": model, **asdict(self)}
        del payload["item"]
        if not self.reply_start:
            del payload["reply_start"]
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def as_openai_messages(self) -> list[dict[str, str]]:
        return [{"role": r, "content": c} for r, c in self.messages]


REFUSED = "refused"  # ChatResult.error of a request the service refused for good (see `refusal`)


@dataclass(frozen=True)
class ChatResult:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    # Set when the request got no answer: a transport or service failure after all retries (a rerun
    # may fare better), or REFUSED: the service refused this very request (HTTP 400/413/422: a
    # content filter, a prompt over the context), which asking again cannot change.
    error: str = ""
    refusal: str = ""  # the service's reason for a refusal, scrubbed of secrets
    detail: str = ""  # for a failure: the server's words and why the request gave up, scrubbed

    @property
    def refused(self) -> bool:
        return self.error == REFUSED


@dataclass(frozen=True)
class Capabilities:
    """What a backend does beyond answering a flat batch, declared so callers never probe for it.

    `prefill`: it writes the prompt itself, so a request's `reply_start` becomes the answer's first
    words. `chains`: it keeps state along a chain (a dialogue's requests in order), so an answer may
    depend on the requests before it and chains must be sent whole. `streams`: `complete` takes
    `on_answer`, called as each answer arrives, before the rest of the batch."""

    prefill: bool = False
    chains: bool = False
    streams: bool = False


AnswerHook = Callable[[int, "ChatResult"], None]


class ChatBackend(ABC):
    """A simulator service: batches of requests in, texts and token usage out."""

    name: ClassVar[str]
    model: str
    capabilities: ClassVar[Capabilities] = Capabilities()

    @abstractmethod
    def complete(self, requests: list[ChatRequest], on_answer: AnswerHook | None = None) -> list[ChatResult]:
        """One result per request, in order (a backend with `streams` calls `on_answer` as each
        arrives; others may ignore it)."""

    def complete_chains(self, chains: list[list[ChatRequest]]) -> list[list[ChatResult]]:
        """Answers for chains of requests (each chain: requests that extend one another, in
        order). A backend without state between requests answers them as one flat batch."""
        return regroup(chains, self.complete([r for chain in chains for r in chain]))

    def summary(self) -> dict:
        """Figures for the manifest (retries, waits, cost, the model's licence); empty by default."""
        return {}

    def worker_cpu_seconds(self) -> float | None:
        """CPU seconds of the backend's own worker processes (an embedded model); None otherwise."""
        return None

    def close(self) -> None:
        """Release processes and connections; idempotent."""


def regroup(chains: list[list[ChatRequest]], flat: list[ChatResult]) -> list[list[ChatResult]]:
    """Flat answers back into the chains' shape."""
    out, at = [], 0
    for chain in chains:
        out.append(flat[at: at + len(chain)])
        at += len(chain)
    return out

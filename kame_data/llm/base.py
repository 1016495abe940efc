"""The chat backend interface: batches of requests in, texts and token usage out."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Protocol


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[tuple[str, str], ...]  # (role, content)
    max_tokens: int = 48
    temperature: float = 0.7
    seed: int = 0
    # The first words of the answer, written for the model (a prefilled reply it continues); only
    # sent to backends with `prefill = True`, and part of the answer they return.
    reply_start: str = ""

    def key(self, backend: str, model: str) -> str:
        """Cache key: everything that determines the answer (an empty reply_start is left out, so
        keys of requests without one stay what they were)."""
        payload = {"backend": backend, "model": model, **asdict(self)}
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

    @property
    def refused(self) -> bool:
        return self.error == REFUSED


class ChatBackend(Protocol):
    name: str
    model: str

    def complete(self, requests: list[ChatRequest]) -> list[ChatResult]:
        ...


def complete_chains(backend: ChatBackend, chains: list[list[ChatRequest]]) -> list[list[ChatResult]]:
    """Answers for chains of requests (each chain: requests that extend one another, in order).
    A backend that keeps state between requests takes them as chains (`complete_chains`); any
    other gets them as one flat batch."""
    if hasattr(backend, "complete_chains"):
        return backend.complete_chains(chains)
    return regroup(chains, backend.complete([r for chain in chains for r in chain]))


def regroup(chains: list[list[ChatRequest]], flat: list[ChatResult]) -> list[list[ChatResult]]:
    """Flat answers back into the chains' shape."""
    out, at = [], 0
    for chain in chains:
        out.append(flat[at: at + len(chain)])
        at += len(chain)
    return out

"""Which simulator backend to use and how: one config type for every LLM call of a run (oracle
predictions, script rewrites), and the registry that opens a backend from it."""

from __future__ import annotations

from dataclasses import dataclass

from kame_data.llm.accounting import Account
from kame_data.llm.base import ChatBackend
from kame_data.step import operational


@dataclass(frozen=True)
class BackendConfig:
    kind: str = "llamacpp"  # llamacpp (embedded) | openai (any compatible server) | vllm (offline, GPU)
    model: str | None = None  # model name for openai / vllm; for llamacpp an embedded model (llamacpp.EMBEDDED)
    model_path: str | None = None  # a GGUF file for llamacpp (default: the embedded model named by `model`)
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    max_tokens: int = 48
    temperature: float = 0.7
    n_ctx: int = 2048
    threads: int | None = operational(None)  # llamacpp: threads per model instance (default: cores / instances)
    instances: int | None = operational(None)  # llamacpp: model instances, each in its own process (default: one per core)
    # How requests are sent (openai), down to max_consecutive_failures: none of these can change an
    # answer, only when it comes (or whether it comes in this run), so none is part of a checkpoint key.
    concurrency: int = operational(32)
    timeout: float = operational(30.0)  # seconds one attempt may take in all: connecting, sending, the whole answer
    max_retries: int = operational(6)
    backoff_base: float = operational(0.5)
    max_retry_after: float = operational(60.0)  # the longest a server's Retry-After is obeyed; a longer one waits this long
    rpm: float | None = operational(None)
    tpm: float | None = operational(None)
    max_consecutive_failures: int = operational(50)
    prompt_price_per_million: float = operational(0.0)
    completion_price_per_million: float = operational(0.0)


def open_backend(cfg: BackendConfig, meter: Account | None = None) -> ChatBackend:
    """`meter`: the calling stage's account on the run's meter (remote backends only)."""
    if cfg.kind == "llamacpp":
        from kame_data.llm.llamacpp import LlamaCppBackend

        return LlamaCppBackend(cfg.model_path, n_ctx=cfg.n_ctx, threads=cfg.threads, instances=cfg.instances,
                               model=cfg.model)
    if cfg.kind == "openai":
        from kame_data.llm.openai_backend import OpenAIBackend

        if not cfg.model:
            raise ValueError("oracle.backend.model is required for the openai backend")
        return OpenAIBackend(cfg.model, base_url=cfg.base_url, api_key_env=cfg.api_key_env,
                             concurrency=cfg.concurrency, timeout=cfg.timeout, max_retries=cfg.max_retries,
                             backoff_base=cfg.backoff_base, rpm=cfg.rpm, tpm=cfg.tpm,
                             max_consecutive_failures=cfg.max_consecutive_failures, meter=meter,
                             max_retry_after=cfg.max_retry_after)
    if cfg.kind == "vllm":
        from kame_data.llm.vllm_backend import VLLMBackend

        if not cfg.model:
            raise ValueError("oracle.backend.model is required for the vllm backend")
        return VLLMBackend(cfg.model, meter=meter)
    raise ValueError(f"unknown simulator backend {cfg.kind!r} (available: llamacpp, openai, vllm)")

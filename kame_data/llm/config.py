"""Which simulator backend to use and how: one config type for every LLM call of a run (oracle
predictions, script rewrites), and the registry that opens a backend from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

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


@dataclass(frozen=True)
class BackendSpec:
    """One kind of simulator backend, as everything outside its module needs it.

    `open` builds it from a config (imports happen there: no backend's packages load unless it is
    used). `resources` gives (cores one running batch keeps busy, batches the step may run at
    once). `runs_on`: where its work happens, for `plan` (cpu: this machine's cores; gpu; api: a
    service elsewhere). `doctor`: what `kame-data doctor` should load to check it."""

    kind: str
    open: Callable[[BackendConfig, Account | None], ChatBackend]
    resources: Callable[[BackendConfig], tuple[float, int]]
    runs_on: str
    doctor: Callable[[BackendConfig], dict[str, Any]] = lambda cfg: {}


def _need_model(cfg: BackendConfig) -> str:
    if not cfg.model:
        raise ValueError(f"backend.model is required for the {cfg.kind} backend")
    return cfg.model


def _open_llamacpp(cfg: BackendConfig, meter: Account | None) -> ChatBackend:
    from kame_data.llm.llamacpp import LlamaCppBackend

    return LlamaCppBackend(cfg.model_path, n_ctx=cfg.n_ctx, threads=cfg.threads, instances=cfg.instances,
                           model=cfg.model)


def _llamacpp_resources(cfg: BackendConfig) -> tuple[float, int]:
    """One batch per model instance keeps every instance busy through the retry rounds (each
    dialogue's chain starts from the same state, so the answers do not depend on scheduling)."""
    from kame_data.llm.llamacpp import plan_instances

    instances, threads = plan_instances(cfg.instances, cfg.threads)
    return float(instances * threads), instances


def _llamacpp_doctor(cfg: BackendConfig) -> dict[str, Any]:
    return {"model_path": cfg.model_path} if cfg.model_path else ({"model": cfg.model} if cfg.model else {})


def _open_openai(cfg: BackendConfig, meter: Account | None) -> ChatBackend:
    from kame_data.llm.openai_backend import OpenAIBackend

    return OpenAIBackend(_need_model(cfg), base_url=cfg.base_url, api_key_env=cfg.api_key_env,
                         concurrency=cfg.concurrency, timeout=cfg.timeout, max_retries=cfg.max_retries,
                         backoff_base=cfg.backoff_base, rpm=cfg.rpm, tpm=cfg.tpm,
                         max_consecutive_failures=cfg.max_consecutive_failures, meter=meter,
                         max_retry_after=cfg.max_retry_after)


def _open_vllm(cfg: BackendConfig, meter: Account | None) -> ChatBackend:
    from kame_data.llm.vllm_backend import VLLMBackend

    return VLLMBackend(_need_model(cfg), meter=meter)


# A remote service takes requests from several batches at once (its client bounds what is in flight).
BACKENDS: dict[str, BackendSpec] = {spec.kind: spec for spec in (
    BackendSpec("llamacpp", _open_llamacpp, _llamacpp_resources, "cpu", _llamacpp_doctor),
    BackendSpec("openai", _open_openai, lambda cfg: (0.2, 8), "api"),
    BackendSpec("vllm", _open_vllm, lambda cfg: (1.0, 1), "gpu"),
)}


def backend_spec(kind: str) -> BackendSpec:
    try:
        return BACKENDS[kind]
    except KeyError:
        raise ValueError(f"unknown simulator backend {kind!r} (available: {', '.join(BACKENDS)})") from None


def open_backend(cfg: BackendConfig, meter: Account | None = None) -> ChatBackend:
    """`meter`: the calling stage's account on the run's meter (remote backends only)."""
    return backend_spec(cfg.kind).open(cfg, meter)

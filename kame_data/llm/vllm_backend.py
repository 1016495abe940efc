"""Offline vLLM: every prompt of a batch in one `LLM.chat` call (GPU; optional extra `vllm`).

vLLM pins a torch that conflicts with moshi's, so it lives in its own environment."""

from __future__ import annotations

from kame_data.llm.accounting import OK, Account, BudgetExceeded, prompt_token_bound
from kame_data.llm.base import ChatBackend, ChatRequest, ChatResult


class VLLMBackend(ChatBackend):
    name = "vllm"

    def __init__(self, model: str, max_model_len: int | None = 4096, gpu_memory_utilization: float = 0.85,
                 dtype: str = "auto", meter: Account | None = None):
        try:
            from vllm import LLM
        except ImportError as e:
            raise RuntimeError("the vllm backend needs `pip install 'kame-data[vllm]'` (a GPU environment "
                               "of its own: vLLM's torch pin conflicts with moshi's)") from e
        self.model = model
        self.meter = meter or Account()  # the run's meter: tokens in the manifest, the budget, as for openai
        self.llm = LLM(model=model, max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
                       dtype=dtype)

    def complete(self, requests: list[ChatRequest], on_answer=None) -> list[ChatResult]:
        from vllm import SamplingParams

        if not requests:
            return []
        params = [SamplingParams(max_tokens=r.max_tokens, temperature=r.temperature, seed=r.seed) for r in requests]
        held = self._reserve(requests)
        try:
            outs = self.llm.chat([r.as_openai_messages() for r in requests], sampling_params=params, use_tqdm=False)
        except BaseException:
            for worst in held:
                self.meter.release(worst)
            raise
        results = [ChatResult(text=o.outputs[0].text, prompt_tokens=len(o.prompt_token_ids or []),
                              completion_tokens=len(o.outputs[0].token_ids)) for o in outs]
        for worst, r in zip(held, results):
            self.meter.settle(worst, r.prompt_tokens, r.completion_tokens)
        return results

    def summary(self) -> dict:
        return self.meter.summary()

    def _reserve(self, requests: list[ChatRequest]) -> list[int]:
        """Hold every request's worst case before the batch runs; none held when one does not fit."""
        held: list[int] = []
        for r in requests:
            worst = self.meter.worst_case(prompt_token_bound(r.messages), r.max_tokens)
            if self.meter.reserve(worst) != OK:
                for w in held:
                    self.meter.release(w)
                raise BudgetExceeded(self.meter.stop_reason())
            held.append(worst)
        return held

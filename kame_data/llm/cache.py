"""A SQLite cache of LLM answers keyed by request hash, shared across runs and recipes."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from pathlib import Path

from kame_data.llm.base import ChatBackend, ChatRequest, ChatResult, regroup


def default_cache_path() -> Path:
    root = os.environ.get("KAME_DATA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "kame-data")
    return Path(root) / "llm-cache.sqlite"


class RequestCache:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, text TEXT NOT NULL,"
            " prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL)")
        self._db.commit()

    def get(self, key: str) -> ChatResult | None:
        with self._lock:
            row = self._db.execute("SELECT text, prompt_tokens, completion_tokens FROM answers WHERE key = ?",
                                   (key,)).fetchone()
        return ChatResult(row[0], row[1], row[2], cached=True) if row else None

    def put(self, key: str, result: ChatResult) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?)",
                             (key, result.text, result.prompt_tokens, result.completion_tokens))
            self._db.commit()

    def close(self) -> None:
        self._db.close()


class CachedBackend:
    """Wraps a backend: answers come from the cache when present; identical requests in a batch
    are sent once; every fresh answer is stored before it is returned."""

    def __init__(self, inner: ChatBackend, cache: RequestCache | None):
        self.inner, self.cache = inner, cache
        self.name, self.model = inner.name, inner.model
        self.calls = 0  # requests actually sent to the backend
        self.cache_hits = 0

    def complete(self, requests: list[ChatRequest]) -> list[ChatResult]:
        keys = [r.key(self.name, self.model) for r in requests]
        found: dict[str, ChatResult] = {}
        todo: dict[str, ChatRequest] = {}
        for key, req in zip(keys, requests):
            if key in found or key in todo:
                continue
            hit = self.cache.get(key) if self.cache else None
            if hit is not None:
                found[key] = hit
                self.cache_hits += 1
            else:
                todo[key] = req
        if todo:
            fresh = self.inner.complete(list(todo.values()))
            self.calls += len(todo)
            for key, res in zip(todo, fresh):
                if self.cache is not None and res.text and not res.error:
                    self.cache.put(key, res)
                found[key] = res
        return [found[k] for k in keys]

    def complete_chains(self, chains: list[list[ChatRequest]]) -> list[list[ChatResult]]:
        """Answers for chains of requests (one dialogue's steps in order; see `llm.llama_worker`).

        A backend that takes chains (the embedded model) may answer a request differently after a
        different history, so its answers are cached under a key of the request *and every request
        before it in the chain*, and a chain with any miss is sent whole: a rerun, a resumed run or
        a run sharing the cache with another gets exactly the answers a fresh run would. Repeats
        within a chain (steps where no word arrived) are asked once. Other backends keep no state:
        their chains go out as one flat batch under the plain keys."""
        if not hasattr(self.inner, "complete_chains"):
            return regroup(chains, self.complete([r for chain in chains for r in chain]))
        plans = []  # per chain: (distinct requests, their chain keys, index of each request among them)
        for chain in chains:
            distinct: dict[ChatRequest, int] = {}
            for req in chain:
                distinct.setdefault(req, len(distinct))
            keys, prev = [], ""
            for req in distinct:
                prev = req.key(self.name, self.model) if not prev else hashlib.sha256(
                    f"{prev}|{req.key(self.name, self.model)}".encode()).hexdigest()
                keys.append(prev)
            plans.append((list(distinct), keys, [distinct[r] for r in chain]))
        answers: list[list[ChatResult] | None] = []
        for reqs, keys, _ in plans:
            hits = [self.cache.get(k) if self.cache else None for k in keys]
            answers.append(hits if all(h is not None for h in hits) else None)
        todo = [i for i, a in enumerate(answers) if a is None]
        self.cache_hits += sum(len(plans[i][0]) for i, a in enumerate(answers) if a is not None)
        if todo:
            fresh = self.inner.complete_chains([plans[i][0] for i in todo])
            for i, results in zip(todo, fresh):
                self.calls += len(results)
                for key, res in zip(plans[i][1], results):
                    if self.cache is not None and not res.error:  # an empty answer is an answer here
                        self.cache.put(key, res)
                answers[i] = results
        return [[answers[c][j] for j in plan[2]] for c, plan in enumerate(plans)]

    def summary(self) -> dict:
        """For the manifest: what was asked, answered from cache, and paid for."""
        out = {"backend": self.name, "model": self.model, "calls": self.calls, "cache_hits": self.cache_hits}
        if getattr(self.inner, "license", ""):
            out["model_license"] = self.inner.license
        meter = getattr(self.inner, "meter", None)
        if meter is not None:
            out.update(meter.summary())
        failures = getattr(self.inner, "failures", None)
        if failures is not None:
            out["failed_attempts"] = failures
        return out


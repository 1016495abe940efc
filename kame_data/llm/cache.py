"""The LLM answer cache keyed by request hash, shared across runs and recipes: a SQLite file on
this machine, or one small JSON file per answer under a folder or object-store URL that every node
of a cluster sees (SQLite's locking is not safe on network filesystems)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
from pathlib import Path

from kame_data.llm.base import ChatBackend, ChatRequest, ChatResult, regroup
from kame_data.storage import Location, Storage, is_url
from kame_data.user_cache import cache_root

log = logging.getLogger(__name__)


def default_cache_path() -> Path:
    return cache_root() / "llm-cache.sqlite"


class RequestCache:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # WAL: an answer is kept if the process dies; one write per answer stays cheap
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


class SharedRequestCache:
    """Answers as ROOT/answers/<key[:2]>/<key>.json: safe for many writers on many nodes (each
    answer is written whole; two nodes asking the same request write the same bytes)."""

    def __init__(self, root: Location):
        self.storage = Storage(root)
        self.path = self.storage.location

    def get(self, key: str) -> ChatResult | None:
        data = self.storage.read(f"answers/{key[:2]}/{key}.json")
        if data is None:
            return None
        d = json.loads(data)
        return ChatResult(d["text"], d["prompt_tokens"], d["completion_tokens"], cached=True)

    def put(self, key: str, result: ChatResult) -> None:
        blob = {"text": result.text, "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.completion_tokens}
        self.storage.write(f"answers/{key[:2]}/{key}.json", json.dumps(blob, ensure_ascii=False).encode("utf-8"))

    def close(self) -> None:
        pass


def open_cache(location: Location) -> RequestCache | SharedRequestCache:
    """A `.sqlite` file path opens the SQLite cache; a folder or a URL opens the shared one."""
    if not is_url(location) and str(location).endswith((".sqlite", ".db")):
        return RequestCache(location)
    return SharedRequestCache(location)


class _InFlight:
    """A request one batch is sending; other batches that need it wait for its answer."""

    __slots__ = ("done", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: ChatResult | None = None  # None: the sender's batch failed before an answer


class CachedBackend(ChatBackend):
    """Wraps a backend: answers come from the cache when present; identical requests are sent once,
    within a batch and across batches running at once (a later one waits for the answer); every
    fresh answer is stored as soon as it arrives (from a backend that streams them, before the rest
    of its batch), so a batch cut short by the budget or a kill loses none. Refusals and failures
    are never stored as answers.

    A cache that cannot store (a full disk, a read-only or broken file) costs one warning line and
    the caching of this run's later answers, not the run: they still reach the dataset, and the
    run's checkpoints keep its finished items; only a later run asks again for what it needs anew."""

    def __init__(self, inner: ChatBackend, cache: RequestCache | None):
        self.inner, self.cache = inner, cache
        self.name, self.model = inner.name, inner.model
        self.capabilities = inner.capabilities  # answers, as far as a caller can tell, are the inner backend's
        self.calls = 0  # requests actually sent to the backend
        self.cache_hits = 0  # requests answered without a call (the cache, or a batch already sending it)
        self.store_failed = ""  # why the cache stopped storing answers in this run, if it did
        self._lock = threading.Lock()
        self._inflight: dict[str, _InFlight] = {}

    def _keep(self, key: str, result: ChatResult) -> None:
        """Store an answer; on the first failure, say so once and stop storing."""
        if self.cache is None or self.store_failed:
            return
        try:
            self.cache.put(key, result)
        except (sqlite3.Error, OSError) as e:
            with self._lock:
                first, self.store_failed = not self.store_failed, f"{type(e).__name__}: {e}"
            if first:
                log.warning("LLM answer cache %s: cannot store answers (%s); the run goes on without caching "
                            "them (its checkpoints keep finished items; a later run asks again for the rest)",
                            getattr(self.cache, "path", "?"), self.store_failed)

    def complete(self, requests: list[ChatRequest], on_answer=None) -> list[ChatResult]:
        keys = [r.key(self.name, self.model) for r in requests]
        found: dict[str, ChatResult] = {}
        todo: dict[str, ChatRequest] = {}
        waits: dict[str, tuple[ChatRequest, _InFlight]] = {}
        for key, req in zip(keys, requests):
            if key in found or key in todo or key in waits:
                continue
            hit = self.cache.get(key) if self.cache else None
            if hit is not None:
                found[key] = hit
                self._count(hits=1)
                continue
            with self._lock:
                other = self._inflight.get(key)
                if other is None:
                    self._inflight[key] = _InFlight()
                    todo[key] = req
                else:
                    waits[key] = (req, other)
        try:
            if todo:
                found.update(self._send(todo))
        finally:
            for key in todo:  # answered or not, whoever waits on these may go on
                self._land(key, found.get(key))
        again = []
        for key, (req, other) in waits.items():
            other.done.wait()
            if other.result is None:
                again.append(req)  # the sender's batch failed: ask ourselves
            else:
                found[key] = other.result
                self._count(hits=1)
        if again:
            found.update(zip((r.key(self.name, self.model) for r in again), self.complete(again)))
        return [found[k] for k in keys]

    def _send(self, todo: dict[str, ChatRequest]) -> dict[str, ChatResult]:
        todo_keys = list(todo)

        def store(index: int, res: ChatResult) -> None:
            self._count(calls=1)
            try:
                if res.text and not res.error:
                    self._keep(todo_keys[index], res)
            finally:
                self._land(todo_keys[index], res)

        if self.inner.capabilities.streams:
            fresh = self.inner.complete(list(todo.values()), on_answer=store)
        else:
            fresh = self.inner.complete(list(todo.values()))
            for i, res in enumerate(fresh):
                store(i, res)
        return dict(zip(todo_keys, fresh))

    def _land(self, key: str, result: ChatResult | None) -> None:
        with self._lock:
            flight = self._inflight.pop(key, None)
        if flight is not None:
            flight.result = result
            flight.done.set()

    def _count(self, calls: int = 0, hits: int = 0) -> None:
        with self._lock:
            self.calls += calls
            self.cache_hits += hits
    def complete_chains(self, chains: list[list[ChatRequest]]) -> list[list[ChatResult]]:
        """Answers for chains of requests (one dialogue's steps in order; see `llm.llama_worker`).

        A backend that takes chains (the embedded model) may answer a request differently after a
        different history, so its answers are cached under a key of the request *and every request
        before it in the chain*, and a chain with any miss is sent whole: a rerun, a resumed run or
        a run sharing the cache with another gets exactly the answers a fresh run would. Repeats
        within a chain (steps where no word arrived) are asked once. Other backends keep no state:
        their chains go out as one flat batch under the plain keys."""
        if not self.inner.capabilities.chains:
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
        self._count(hits=sum(len(plans[i][0]) for i, a in enumerate(answers) if a is not None))
        if todo:
            fresh = self.inner.complete_chains([plans[i][0] for i in todo])
            for i, results in zip(todo, fresh):
                self._count(calls=len(results))
                for key, res in zip(plans[i][1], results):
                    if not res.error:  # an empty answer is an answer here
                        self._keep(key, res)
                answers[i] = results
        return [[answers[c][j] for j in plan[2]] for c, plan in enumerate(plans)]

    def close(self) -> None:
        self.inner.close()

    def worker_cpu_seconds(self) -> float | None:
        return self.inner.worker_cpu_seconds()

    def summary(self) -> dict:
        """For the manifest: what was asked, answered from cache, and paid for."""
        out = {"backend": self.name, "model": self.model, "calls": self.calls, "cache_hits": self.cache_hits}
        out.update(self.inner.summary())  # cost, retries, waits and refusals, the model's licence
        if self.store_failed:
            out["cache_store_failed"] = self.store_failed
        return out


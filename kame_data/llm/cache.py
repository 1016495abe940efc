"""The LLM answer cache keyed by request hash, shared across runs and recipes: a SQLite file on
this machine, or one small JSON file per answer under a folder or object-store URL that every node
of a cluster sees (SQLite's locking is not safe on network filesystems)."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

from kame_data.llm.base import ChatBackend, ChatRequest, ChatResult
from kame_data.storage import Location, Storage, is_url


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

    def summary(self) -> dict:
        """For the manifest: what was asked, answered from cache, and paid for."""
        out = {"backend": self.name, "model": self.model, "calls": self.calls, "cache_hits": self.cache_hits}
        meter = getattr(self.inner, "meter", None)
        if meter is not None:
            out.update(meter.summary())
        failures = getattr(self.inner, "failures", None)
        if failures is not None:
            out["failed_attempts"] = failures
        return out

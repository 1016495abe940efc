"""The script stage as the runner sees it."""

from __future__ import annotations

import logging
from collections import Counter

from kame_data.llm.base import ChatBackend
from kame_data.records import Dialogue, Reject, SourceItem
from kame_data.script.template import ScriptConfig, script_batch

log = logging.getLogger(__name__)

_SHARED_CACHE = object()


class ScriptStage:
    """Template dialogues, or LLM rewrites of them (`style: llm`).

    In LLM mode the backend opens once (`open`) and goes through the shared request cache, so a
    rerun never pays twice; `stats` counts rewrites used, fallbacks to the template (by reason)
    and rejects."""

    name = "script"

    def __init__(self, cfg: ScriptConfig, seed: int = 0, backend: ChatBackend | None = None, cache=_SHARED_CACHE):
        """`backend` overrides the configured one (tests); `cache` is a RequestCache, None for no
        cache, or by default the shared cache (`~/.cache/kame-data/llm-cache.sqlite`)."""
        if cfg.style not in ("template", "llm"):
            raise ValueError(f"unknown script style {cfg.style!r} (available: template, llm)")
        self.cfg, self.seed = cfg, seed
        self.backend = backend
        self.cache = cache
        self.stats: Counter[str] = Counter()

    def open(self) -> None:
        if self.cfg.style != "llm" or self.backend is not None:
            return
        from kame_data.llm.cache import CachedBackend, RequestCache, default_cache_path
        from kame_data.llm.config import open_backend

        if self.cache is _SHARED_CACHE:
            self.cache = RequestCache(default_cache_path())
        self.backend = CachedBackend(open_backend(self.cfg.llm.backend), self.cache)

    def process(self, batch: list[SourceItem]) -> list[Dialogue | Reject]:
        if self.cfg.style == "template":
            return script_batch(batch, self.cfg, self.seed)
        from kame_data.script.llm import rewrite_batch

        self.open()
        out = rewrite_batch(batch, self.cfg, self.seed, self.backend, self.stats)
        log.info("script (llm): %d rewrites used, %d template fallbacks so far (%s)", self.stats["llm"],
                 self.stats["fallback"], ", ".join(f"{k[9:]}: {v}" for k, v in sorted(self.stats.items())
                                                   if k.startswith("fallback_")) or "none")
        return out

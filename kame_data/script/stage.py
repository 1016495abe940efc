"""The script stage as the runner sees it."""

from __future__ import annotations

import logging
from collections import Counter

from kame_data.llm.base import ChatBackend
from kame_data.records import Dialogue, Reject, SourceItem
from kame_data.script.template import ScriptConfig, script_batch, variant_count
from kame_data.step import Step

log = logging.getLogger(__name__)

_SHARED_CACHE = object()


class ScriptStage(Step[SourceItem, Dialogue | Reject]):
    """Template dialogues, or LLM rewrites of them (`style: llm`).

    In LLM mode the backend opens once (`setup`) and goes through the shared request cache, so a
    rerun never pays twice; `stats` counts rewrites used, refusals and fallbacks to the template
    (by reason) and rejects; in template mode, dialogues made and refused (`answer_lost` among them)."""

    name = "script"

    def __init__(self, config: ScriptConfig, seed: int = 0, backend: ChatBackend | None = None,
                 cache=_SHARED_CACHE, meter=None):
        """`backend` overrides the configured one (tests); `cache` is a RequestCache, None for no
        cache, or by default the shared cache (`~/.cache/kame-data/llm-cache.sqlite`); `meter` is
        the run's Meter (its budget covers the rewrites too; by default an unbounded one)."""
        if config.style not in ("template", "llm"):
            raise ValueError(f"unknown script style {config.style!r} (available: template, llm)")
        super().__init__(config, seed)
        self.backend = backend
        self.cache = cache
        self.meter = meter
        self.stats: Counter[str] = Counter()

    @property
    def cfg(self) -> ScriptConfig:
        return self.config

    def setup(self) -> None:
        if self.cfg.style != "llm" or self.backend is not None:
            return
        from kame_data.llm.accounting import Account, Meter, Prices
        from kame_data.llm.cache import CachedBackend, RequestCache, default_cache_path
        from kame_data.llm.config import open_backend

        if self.cache is _SHARED_CACHE:
            self.cache = RequestCache(default_cache_path())
        b = self.cfg.llm.backend
        account = Account(self.meter if self.meter is not None else Meter(),
                          Prices(b.prompt_price_per_million, b.completion_price_per_million))
        self.backend = CachedBackend(open_backend(b, account), self.cache)

    def run(self, batch: list[SourceItem]) -> list[list[Dialogue | Reject]]:
        """Each item's dialogues (one per variant). LLM rewrites of the whole batch are requested
        together, so a remote backend overlaps them."""
        flat = self.process(batch)
        groups, at = [], 0
        for item in batch:
            n = variant_count(item, self.cfg)
            groups.append(flat[at: at + n])
            at += n
        return groups

    def process(self, batch: list[SourceItem]) -> list[Dialogue | Reject]:
        """Every item's dialogues, flattened in item order."""
        if self.cfg.style == "template":
            out = script_batch(batch, self.cfg, self.seed)
            self.stats["template"] += sum(isinstance(d, Dialogue) for d in out)
            self.stats["template_rejected"] += sum(isinstance(d, Reject) for d in out)
            self.stats["answer_lost"] += sum(isinstance(d, Reject) and d.reason == "answer_lost" for d in out)
            return out
        from kame_data.script.llm import rewrite_batch

        self.setup()
        out = rewrite_batch(batch, self.cfg, self.seed, self.backend, self.stats)
        log.info("script (llm): %d rewrites used, %d template fallbacks so far (%s)", self.stats["llm"],
                 self.stats["fallback"], ", ".join(f"{k[9:]}: {v}" for k, v in sorted(self.stats.items())
                                                   if k.startswith("fallback_")) or "none")
        return out

    def summary(self) -> dict:
        """Backend figures, and what became of each dialogue: template or rewrite used, refusals
        by reason (answer lost, too long, markup, ...), retries and fallbacks."""
        summary = self.backend.summary() if self.backend is not None and hasattr(self.backend, "summary") else {}
        key = "rewrites" if self.cfg.style == "llm" else "scripts"
        return {**summary, **({key: dict(sorted(self.stats.items()))} if self.stats else {})}

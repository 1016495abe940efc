"""The script stage as the runner sees it."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from kame_data.llm.base import ChatBackend
from kame_data.records import Dialogue, Reject, SourceItem
from kame_data.script.config import ScriptConfig
from kame_data.script.template import script_batch, variant_numbers
from kame_data.step import RunContext, Step, StepSpec
from kame_data.text.spoken import SPOKEN_VERSION

log = logging.getLogger(__name__)

STYLES = ("template", "llm")


class ScriptStage(Step[SourceItem, Dialogue | Reject]):
    """Template dialogues, or LLM rewrites of them (`style: llm`).

    In LLM mode the backend opens once (`setup`) and goes through the run's request cache, so a
    rerun never pays twice; `stats` counts rewrites used, refusals and fallbacks to the template
    (by reason) and rejects; in template mode, dialogues made and refused (`answer_lost` among them)."""

    name = "script"

    def __init__(self, config: ScriptConfig, context: RunContext | None = None, backend: ChatBackend | None = None):
        """The context's cache keeps every rewrite (None: no cache) and its meter is the run's (its
        budget covers the rewrites too; by default an unbounded one). `backend` replaces the
        configured one (tests)."""
        if config.style not in STYLES:
            raise ValueError(f"unknown script style {config.style!r} (available: {', '.join(STYLES)})")
        super().__init__(config, context)
        self.backend = backend
        self.stats: Counter[str] = Counter()

    @property
    def cfg(self) -> ScriptConfig:
        return self.config

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "spoken_version": SPOKEN_VERSION}

    def setup(self) -> None:
        if self.cfg.style != "llm" or self.backend is not None:
            return
        from kame_data.llm.accounting import Account, Meter, Prices
        from kame_data.llm.cache import CachedBackend
        from kame_data.llm.config import open_backend

        b = self.cfg.llm.backend
        meter = self.context.meter
        account = Account(meter if meter is not None else Meter(),
                          Prices(b.prompt_price_per_million, b.completion_price_per_million))
        self.backend = CachedBackend(open_backend(b, account), self.context.cache)

    def teardown(self) -> None:
        if self.backend is not None:
            self.backend.close()

    def run(self, batch: list[SourceItem]) -> list[list[Dialogue | Reject]]:
        """Each item's dialogues (one per variant). LLM rewrites of the whole batch are requested
        together, so a remote backend overlaps them."""
        flat = self._script(batch)
        groups, at = [], 0
        for item in batch:
            n = len(variant_numbers(item, self.cfg))
            groups.append(flat[at: at + n])
            at += n
        return groups

    def _script(self, batch: list[SourceItem]) -> list[Dialogue | Reject]:
        """Every item's dialogues, flattened in item order."""
        if self.cfg.style == "template":
            out = script_batch(batch, self.cfg, self.seed)
            self.stats["template"] += sum(isinstance(d, Dialogue) for d in out)
            self.stats["template_rejected"] += sum(isinstance(d, Reject) for d in out)
            self.stats["answer_lost"] += sum(isinstance(d, Reject) and d.reason == "answer_lost" for d in out)
            return out
        from kame_data.script.llm import rewrite_batch

        out = rewrite_batch(batch, self.cfg, self.seed, self.backend, self.stats)
        log.info("script (llm): %d rewrites used, %d template fallbacks so far (%s)", self.stats["llm"],
                 self.stats["fallback"], ", ".join(f"{k[9:]}: {v}" for k, v in sorted(self.stats.items())
                                                   if k.startswith("fallback_")) or "none")
        return out

    def worker_cpu_seconds(self) -> float | None:
        return self.backend.worker_cpu_seconds() if self.backend is not None else None

    def summary(self) -> dict:
        """Backend figures, and what became of each dialogue: template or rewrite used, refusals
        by reason (answer lost, too long, markup, ...), retries and fallbacks."""
        summary = self.backend.summary() if self.backend is not None else {}
        key = "rewrites" if self.cfg.style == "llm" else "scripts"
        return {**summary, **({key: dict(sorted(self.stats.items()))} if self.stats else {})}


def _doctor(cfg: ScriptConfig) -> dict:
    """The rewrite model `kame-data doctor --recipe` should load (LLM style, embedded backend)."""
    if cfg.style != "llm":
        return {}
    from kame_data.llm.config import backend_spec

    return backend_spec(cfg.llm.backend.kind).doctor(cfg.llm.backend)


SPEC = StepSpec(ScriptStage, ScriptConfig, order=10, output="scripts.jsonl",
                about="spoken-style dialogues: the user asks, the assistant answers (template or LLM rewrite)",
                doctor=_doctor)

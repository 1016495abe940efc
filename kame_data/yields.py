"""Yields for `kame-data plan`: how many of the dialogues a recipe asks for survive the source
filters and the script step, from the shares the calibration measured on real fixture rows
(`benchmarks/calibrate.py --only yields`)."""

from __future__ import annotations

from typing import Any

from kame_data.script.stage import ScriptStage
from kame_data.sources.step import SourcesStep


def after_yield(name: str, kind: str, dialogues: int | None, items_from: str, style: str, yields: dict[str, Any],
                 notes: list[str]) -> int | None:
    """The dialogues left once the sources and script steps have rejected what they reject: the
    share of fixture rows of this kind the calibration saw them keep. A quota or per-category
    sample is drawn from the items past the source filters, so only the script's share applies."""
    y = yields.get("kinds", {}).get(kind)
    if dialogues is None or not y:
        return dialogues
    sampled = items_from in ("quota", "per_category")
    if style != "template":  # the calibration measured the template script; other styles keep their own share
        y = {**y, "kept": round(y["kept"] / max(1e-9, y["script_kept"]), 4), "script_kept": 1.0,
             "rejects": {SourcesStep.name: y["rejects"].get(SourcesStep.name, {})}}
    share = y["script_kept"] if sampled else y["kept"]
    if share >= 1.0:
        return dialogues
    kept = round(dialogues * share)
    rejects: dict[str, float] = {}
    for stage, by in y["rejects"].items():
        for reason, v in by.items() if stage == ScriptStage.name or not sampled else ():
            rejects[reason] = rejects.get(reason, 0.0) + v  # a reason both steps give, summed
    worst = sorted(rejects.items(), key=lambda kv: -kv[1])[:3]
    why = ", ".join(f"{reason} {v:.1%}" for reason, v in worst) or "none"
    whose = "of the items past the source filters" if sampled else "of the rows"
    if style != "template":
        whose += " (the source filters' share; the template script's own rejects are not counted)"
    notes.append(f"{name}: {dialogues:,} dialogues asked, {kept:,} expected: the script keeps {share:.1%} {whose} "
                 f"(rejects, of {y['rows']} fixture {kind} rows: {why}; calibration of {yields['measured']})")
    return kept


def rewrite_note(asked: str, script, calibration: dict) -> str | None:
    """What the plan says of LLM rewrites that would be thrown away: `asked` is the recipe's
    `script.style` as written (auto resolves before the plan sees it), `script` the resolved
    config. The embedded model's measured fallback rate (calibration llamacpp.script) says how
    many of its rewrites fail the checks and fall back to the template."""
    measured = ((calibration.get("llamacpp") or {}).get(ScriptStage.name) or {})
    rate, basis = measured.get("fallback_rate"), measured.get("fallback") or {}
    if rate is None or script.llm.backend.kind != "llamacpp":
        return None
    seen = (f"its rewrites of {basis.get('dialogues', '?')} dialogues fell back to the template {rate:.0%} of the "
            f"time, measured by `{basis.get('command', 'benchmarks/calibrate.py')}`")
    if asked == "auto":
        return (f"script.style auto is template here: the rewrite model is the embedded one, and {seen}. Point "
                "script.llm.backend at a served model to rewrite")
    if script.style == "llm" and rate >= 0.5:
        return (f"script rewrites by the embedded model are mostly thrown away: {seen}. Set script.style: auto "
                "(the template with this model) or point script.llm.backend at a served model")
    return None

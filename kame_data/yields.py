"""Yields for `kame-data plan`: how many of the dialogues a recipe asks for survive the source
filters and the script step, from the shares the calibration measured on real fixture rows
(`benchmarks/calibrate.py --only yields`), or from the recipe's own local rows scripted with its
settings (`sampled_turns`), which also give the turns' typical length."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kame_data.script.stage import ScriptStage
from kame_data.sources.step import SourcesStep

if TYPE_CHECKING:
    from kame_data.recipe import Recipe, SourceSpec
    from kame_data.runner.config import RunConfig

log = logging.getLogger(__name__)


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


SAMPLE_ROWS = 64  # a local source's first items the plan scripts to measure its turns


@dataclass(frozen=True)
class Sample:
    """A local source's first items through its filters and the template script, as the run would."""

    typical: tuple[float, float, int]  # user words, assistant words, turns per dialogue
    read: int  # items read (accepted or refused by the filters)
    passed: int  # past the filters
    kept: int  # scripted into a dialogue

    def share(self, drawn: bool) -> float:
        """The share kept: of the items past the filters for a quota / per-category draw, else of all."""
        return self.kept / max(1, self.passed if drawn else self.read)


MIN_YIELD_SAMPLE = 32  # items a sample needs before its share kept replaces the calibration's


def sampled_turns(recipe: Recipe, spec: SourceSpec, cfg: RunConfig) -> Sample | None:
    """The first SAMPLE_ROWS items of a local source through the filters and the template script
    with the recipe's own settings (its option counts and turn limits change a turn's length and
    what is refused; the template is cheap). None for a hub source, the LLM style, or a file that
    gives no dialogue."""
    if not spec.path or cfg.script.style != "template":
        return None
    from dataclasses import replace

    from kame_data.records import ASSISTANT, USER
    from kame_data.records import Reject as Refused
    from kame_data.script.template import script_turns
    from kame_data.sources.read import load_source
    from kame_data.sources.rows import SourceError
    from kame_data.text import spoken_words, to_spoken

    sample = replace(spec, limit=min(SAMPLE_ROWS, spec.limit or SAMPLE_ROWS), quota=None, per_category=None)
    users, assistants, turns = [], [], []
    read = passed = 0
    try:
        for item in load_source(sample, recipe, cfg.filters):
            read += 1
            passed += not isinstance(item, Refused)
            script = item if isinstance(item, Refused) else script_turns(item, 0, cfg.script, recipe.seed)
            if isinstance(script, Refused):
                continue
            words = {USER: 0, ASSISTANT: 0}
            for role, text in script.turns:
                words[role] += len(spoken_words(to_spoken(text)))
            users.append(words[USER])
            assistants.append(words[ASSISTANT])
            turns.append(len(script.turns))
    except (SourceError, OSError, ValueError) as e:
        log.warning("plan: cannot sample %s: %s", spec.path, e)
        return None
    if not turns:
        return None
    n = len(turns)
    return Sample((sum(users) / n, sum(assistants) / n, max(2, 2 * round(sum(turns) / n / 2))), read, passed, n)

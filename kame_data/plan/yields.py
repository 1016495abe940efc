"""Yields for `kame-data plan`: how many of the dialogues a recipe asks for survive the source
filters and the script step, from the shares the calibration measured on real fixture rows
(`benchmarks/calibrate.py --only yields`), or from the recipe's own local rows scripted with its
settings (`sampled_turns`), which also give the turns' typical length."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kame_data.script.stage import ScriptStage
from kame_data.sources.step import SourcesStep

from kame_data.sources.allocate import Allocation, target_count

if TYPE_CHECKING:
    from kame_data.recipe import Recipe, SourceSpec
    from kame_data.runner.config import RunConfig

log = logging.getLogger(__name__)


def _count_rows(recipe: Recipe, spec: SourceSpec) -> int | None:
    """Rows of a local source file (cheap: no parsing into items, no filters)."""
    if not spec.path:
        return None
    from kame_data.sources.rows import SourceError, read_rows

    try:
        return sum(1 for r in read_rows(path=recipe.resolve(spec.path)) if isinstance(r, dict))
    except (SourceError, OSError, ValueError) as e:
        log.warning("plan: cannot count rows of %s: %s", spec.path, e)
        return None


def field_warnings(recipe: Recipe, spec: SourceSpec) -> list[str]:
    """A local jsonl source's `fields:` checked against its first SAMPLE_ROWS rows: a part that names
    no field of any of them (its items would all be rejected when the part is the question or answer)."""
    if spec.kind != "jsonl" or not spec.path or not spec.fields:
        return []
    from itertools import islice

    from kame_data.sources.jsonl import unmatched_fields
    from kame_data.sources.rows import SourceError, read_rows

    try:
        rows = list(islice(read_rows(path=recipe.resolve(spec.path)), SAMPLE_ROWS))
    except (SourceError, OSError, ValueError):
        return []  # the row count says why
    return [f"{spec.source}: {w}" for w in unmatched_fields(rows, dict(spec.fields))]


def source_items(recipe: Recipe, spec: SourceSpec) -> tuple[int | None, str]:
    """A source's item count as the recipe gives it, and from what: quota, per_category, limit, rows
    (a local file's, before filters) or unknown."""
    if spec.quota is not None:
        return spec.quota, "quota"
    if isinstance(spec.per_category, dict):
        n = sum(spec.per_category.values())
        return (min(n, spec.limit) if spec.limit else n), "per_category"
    if spec.limit is not None:
        return spec.limit, "limit"
    rows = _count_rows(recipe, spec)
    return (rows, "rows") if rows is not None else (None, "unknown")


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


# ---------------------------------------------------------------- dialogue counts (sources/allocate.py)

CAPS = (1, 2, 3, 4)  # the max_variants a whole-split calibration measures the capacity at


@dataclass(frozen=True)
class Counts:
    """A `dialogues` source's count as the plan sees it: drawn and passing items, dialogues kept
    and short, why, and from what (`basis`)."""

    asked: int
    drawn: int | None  # items the dialogues are spread over
    passing: int | None  # items past the filters
    rows: int | None  # rows read
    kept: int
    reasons: dict[str, int]
    basis: str  # how it was known: measured on the rows, or the shipped whole-split calibration
    remedies: tuple[str, ...] = ()  # what would meet the count

    @property
    def shortfall(self) -> int:
        return max(0, self.asked - self.kept)

    def line(self, name: str) -> str:
        rows = f" of {self.rows:,} rows" if self.rows else ""
        head = (f"{name}: {self.kept:,} of {self.asked:,} dialogues asked, from {_n(self.drawn)} items drawn of "
                f"{_n(self.passing)} past the filters{rows} ({self.basis})")
        if not self.shortfall:
            return head
        why = ", ".join(f"{k} {v:,}" for k, v in self.reasons.items())
        more = f"; would meet it: {'; '.join(self.remedies)}" if self.remedies else ""
        return f"{head}; {self.shortfall:,} short ({why}){more}"


def _n(v: int | None) -> str:
    return "?" if v is None else f"{v:,}"


def measure_counts(recipe: Recipe, spec: SourceSpec, cfg: RunConfig) -> "Allocation":
    """What `kame-data run` will hand the script step for this source, found the way the run finds
    it: its rows through the filters, the draw and the allocation with the script's verdicts
    (minutes for a whole benchmark split; exact)."""
    from kame_data.script.template import script_checks

    step = SourcesStep(recipe, cfg.filters, None, **script_checks(cfg))
    step.run([spec])
    return step.allocations[spec.name or spec.kind]


def counts_from_allocation(alloc: "Allocation", spec: SourceSpec, cfg: RunConfig, where: str) -> Counts:
    return Counts(asked=alloc.asked, drawn=alloc.items, passing=alloc.passed, rows=alloc.read, kept=alloc.dialogues,
                  reasons=alloc.reasons(), basis=f"measured on {where}",
                  remedies=_remedies(spec, cfg, alloc.shortfall, alloc.filtered.get("too_long", 0),
                                     # short at the cap: the variants taken grow about in proportion to it
                                     {alloc.max_variants: alloc.dialogues} if alloc.dialogues < alloc.target else None))


def counts_from_calibration(spec: SourceSpec, cfg: RunConfig, splits: dict[str, Any]) -> Counts | None:
    """The count from the whole-split calibration of this kind (`benchmarks/calibrate.py --only yields
    --split KIND=FILE`): its items past the filters and, per max_variants, the variants the script
    takes over all of them. The recipe's quota draws its share of them; past the measured caps the
    capacity grows by the last cap's rate. None when the kind was not measured."""
    s = splits.get(spec.kind)
    if not s or spec.dialogues is None:
        return None
    passing, capacity = s["passed"], {int(k): v for k, v in s["capacity"].items()}
    drawn = min(spec.quota, passing) if spec.quota is not None else passing
    scale = drawn / max(1, passing)
    top = max(capacity)
    cap = spec.max_variants
    total = capacity[cap] if cap in capacity else capacity[top] * cap / top
    can = round(total * scale)
    target = target_count(spec.dialogues, drawn, spec.quota, spec.fill)
    kept = min(target, can)
    # the run's own reasons (sources/allocate.py), over the split's refusals drawn to this quota
    reasons = Allocation(spec.name or spec.kind, spec.dialogues, target, drawn, kept, Counter(s.get("refused", {})),
                         max_variants=cap).reasons()
    basis = (f"the calibration of {s['measured']} on a whole split: {s.get('file', '?')}, {s['rows']:,} rows, for "
             f"{s['split']}; `{s['command']}`")
    if s.get("settings") != settings_key(cfg):
        basis += "; measured with the paper recipe's filters and script settings, not this recipe's"
    too_long = round(s.get("filtered", {}).get("too_long", 0) * scale)
    return Counts(asked=spec.dialogues, drawn=drawn, passing=passing, rows=s["rows"], kept=kept, reasons=reasons,
                  basis=basis, remedies=_remedies(spec, cfg, spec.dialogues - kept, too_long, capacity, scale))


def _remedies(spec: SourceSpec, cfg: RunConfig, short: int, too_long: int, capacity: dict[int, float] | None,
              scale: float = 1.0) -> tuple[str, ...]:
    """What would meet a short count: a larger max_variants (the smallest that would, where the
    capacity per cap is known), a served rewrite model for the items refused too_long."""
    if short <= 0:
        return ()
    out = []
    if capacity:
        rate = max(capacity.values()) / max(capacity)  # variants taken per unit of cap, at the top
        need = next((c for c in sorted(capacity) if capacity[c] * scale >= spec.dialogues), None)
        if need is None and rate * scale > 0:
            need = -(-spec.dialogues // max(1, round(rate * scale)))
        if need is not None and need > spec.max_variants:
            out.append(f"max_variants: {need}" + (" (each item said that many ways: more items would be better)"
                                                 if need > 2 * spec.max_variants else ""))
    if too_long and cfg.script.style != "llm":
        out.append(f"a served rewrite model (script.style llm, script.llm.backend) for the {too_long:,} items "
                   "refused too_long")
    return tuple(out)


def settings_key(cfg: RunConfig) -> str:
    """The filters and script settings a count depends on, as one short hash (a calibration's
    figures apply as measured only to a recipe with the same)."""
    import hashlib
    import json
    from dataclasses import asdict

    script = {k: v for k, v in asdict(cfg.script).items() if k != "llm"}
    blob = json.dumps({"filters": asdict(cfg.filters), ScriptStage.name: script, "seed": cfg.seed}, sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def dialogue_counts(recipe: Recipe, spec: SourceSpec, cfg: RunConfig, copy: str | None, measure: bool,
                     yields: dict[str, Any]) -> Counts | None:
    """A `dialogues` source's count: measured on its rows when they are here (its local file, or
    `copy` of a hub split) and `measure`; else from the whole-split calibration; None for a source
    without `dialogues` or a kind the calibration has not measured."""
    if spec.dialogues is None:
        return None
    if measure and (copy or spec.path):
        from dataclasses import replace

        from kame_data.sources.rows import SourceError

        local = replace(spec, path=str(copy), hub=None) if copy else spec
        log.info("plan: measuring %s on its rows (filters, draw and the script's verdicts)", spec.name or spec.kind)
        try:
            alloc = measure_counts(recipe, local, cfg)
        except (SourceError, OSError) as e:
            log.warning("plan: cannot measure %s on %s: %s", spec.name or spec.kind, copy or spec.path, e)
        else:
            return counts_from_allocation(alloc, spec, cfg, f"its {alloc.read:,} rows")
    return counts_from_calibration(spec, cfg, yields.get("splits", {}))


def split_capacity(recipe: Recipe, spec: SourceSpec, cfg: RunConfig, caps: tuple[int, ...] = CAPS) -> dict[str, Any]:
    """A whole split's figures for the shipped calibration: rows read, items past the filters (and
    the filters' reasons), and for each max_variants in `caps` the variants the script takes over
    all of those items (its verdicts on each item's first max(caps) variants), with the refusals'
    reasons. `plan` draws the recipe's quota from them (counts_from_calibration)."""
    from collections import Counter

    from kame_data.script.template import script_checks

    checks = script_checks(cfg)
    judge = checks["verdict"]  # the run's own (script/template.py), on every variant up to the top cap
    items, rejects = SourcesStep(recipe, cfg.filters, None, **checks).read(spec)  # the run's filters and de-duplication
    rows, passed = len(items) + len(rejects), len(items)
    filtered: Counter[str] = Counter(r.reason for r in rejects)
    refused: Counter[str] = Counter()
    capacity = dict.fromkeys(caps, 0)
    for item in items:
        taken = 0
        for v in range(max(caps)):
            r = judge(item, v)
            if r is None:
                taken += 1
            else:
                refused[r.reason] += 1
            if v + 1 in capacity:
                capacity[v + 1] += taken
    return {"rows": rows, "passed": passed, "filtered": dict(filtered.most_common()), "capacity": capacity,
            "refused": dict(refused.most_common()), "settings": settings_key(cfg)}

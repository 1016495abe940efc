"""`kame-data plan`: what a recipe will cost, before anything runs.

Nothing is downloaded, synthesised or sent to a model. Item counts come from the recipe (a
source's `quota`, else its `limit`; a local file without either is counted by its rows, before
filters); dialogues from `dialogues` or items x variants. Audio length and LLM use are estimates:
typical spoken words per turn for each source kind (measured on the fixture rows with the
template script), the recipe's voices and pauses, and the oracle ladder computed on a synthetic
dialogue of that shape with the recipe's interval and target.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from kame_data.llm.accounting import Prices
from kame_data.plan.projection import Projection, Resources, format_projection, load_calibration, project
from kame_data.oracle.config import OracleConfig
from kame_data.oracle.stage import OracleStage
from kame_data.recipe import Recipe, SourceSpec
from kame_data.records import ASSISTANT, SPEAKER, USER, Word
from kame_data.runner.config import RunConfig
from kame_data.script.config import LlmScriptConfig
from kame_data.script.stage import ScriptStage
from kame_data.speech.config import GapConfig
from kame_data.speech.voice import words_per_second
from kame_data.speech.voices import cast_shares
from kame_data.plan.yields import (MIN_YIELD_SAMPLE, after_yield, dialogue_counts, field_warnings, rewrite_note, sampled_turns,
                                   source_items)

log = logging.getLogger(__name__)

# Spoken words per user turn and per assistant turn, and turns per dialogue, with the template
# script on the fixture rows (kame_data's own measurement; MT-Bench assistant turns are its terse
# reference answers, which the LLM style replaces).
TYPICAL_TURNS: dict[str, tuple[float, float, int]] = {
    "mmlu_pro": (74.0, 17.0, 2),
    "gsm8k": (53.0, 48.0, 2),
    "hssbench": (74.0, 13.0, 2),
    "mt_bench": (40.0, 8.0, 4),
    "jsonl": (40.0, 25.0, 2),
}
# Characters of the LLM-style rewrite prompt per dialogue (system + item + template), same measurement.
REWRITE_PROMPT_CHARS = {"mmlu_pro": 1770, "gsm8k": 1610, "hssbench": 1770, "mt_bench": 1330, "jsonl": 1500}
CHARS_PER_TOKEN = 4.0
TOKENS_PER_WORD = 1.35
ORACLE_REPLY_WORDS = 22  # predictions are asked for 10-30 words


@dataclass
class SourcePlan:
    source: str
    kind: str
    origin: str  # local file or hub id
    items: int | None
    items_from: str  # quota | limit | per_category | rows | unknown
    dialogues: int | None  # as the recipe asks
    kept: int | None  # expected after the sources and script steps' rejects (the calibration's yield)
    seconds_per_dialogue: float
    audio_hours: float | None
    script_calls: int | None
    oracle_calls: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    passing: int | None = None  # a `dialogues` source: items past its filters (measured or calibrated)
    shortfall: int | None = None  # a `dialogues` source: dialogues asked that will not be made


@dataclass
class Plan:
    recipe: str
    style: str
    sources: list[SourcePlan] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what the run would trip on (a `fields:` that matches no row)
    prices: Prices = field(default_factory=Prices)  # the oracle backend's price table
    budget_usd: float | None = None
    speech_seconds: dict[str, float] = field(default_factory=dict)  # audio seconds per TTS engine
    voices: dict[str, dict[str, Any]] = field(default_factory=dict)  # role -> its pool as cast (_cast_summary)
    llm: dict[str, dict[str, Any]] = field(default_factory=dict)  # per LLM stage: kind, calls, tokens
    qa: float = 0.0  # share of the audio Whisper QA hears (speak.qa.sample, 0 with QA off)
    qa_gpu: float = 0.0  # the same with Whisper on a GPU (speak.qa.gpu_sample, else sample)
    device: str = "auto"  # the recipe's device: where Whisper may run
    projection: Projection | None = None
    # step -> part -> declared core-s per audio second (StepSpec.cost) of what the recipe switches on
    step_parts: dict[str, dict[str, float]] = field(default_factory=dict)
    steps: list[str] = field(default_factory=list)  # the run's steps in order (the registry's)

    def project(self, res: Resources, calibration: dict[str, Any] | None = None) -> Projection | None:
        """Wall time per stage on `res` (None while the size is unknown)."""
        if self.total("kept") is None:
            return None
        cal = calibration or load_calibration()
        cal = cal | {"speak_core_s_per_audio_s": _engine_rates(cal, self.speech_seconds, self.notes)}
        self.projection = project(int(self.total("kept")), self.speech_seconds, self.llm, (self.qa, self.qa_gpu), res, cal,
                                  self.step_parts, self.device)
        return self.projection

    def cpu_hours(self) -> dict[str, float] | None:
        """Core-hours per stage on this machine's cores (the projection's; None before `project`)."""
        if self.projection is None:
            return None
        return {s.stage: round(s.work / 3600, 3) for s in self.projection.stages
                if s.resource in ("cpu", "driver") and s.work is not None}

    @property
    def cost_usd(self) -> float | None:
        prompt, completion = self.total("prompt_tokens"), self.total("completion_tokens")
        if prompt is None or completion is None:
            return None
        return self.prices.cost(int(prompt), int(completion))

    def total(self, key: str) -> int | float | None:
        values = [getattr(s, key) for s in self.sources]
        return None if any(v is None for v in values) else sum(values)

    def to_dict(self) -> dict[str, Any]:
        keys = ("items", "dialogues", "kept", "shortfall", "audio_hours", "script_calls", "oracle_calls", "prompt_tokens",
                "completion_tokens")
        return {"recipe": self.recipe, "style": self.style, "sources": [asdict(s) for s in self.sources],
                "totals": {**{k: self.total(k) for k in keys}, "cost_usd": self.cost_usd},
                "prices": asdict(self.prices), "budget_usd": self.budget_usd, "notes": list(self.notes),
                "warnings": list(self.warnings),
                "cpu_hours": self.cpu_hours(), "steps": list(self.steps), "voices": self.voices,
                **({"projection": self.projection.to_dict()} if self.projection else {})}


def _engine_rates(cal: dict[str, Any], engines: dict[str, float], notes: list[str]) -> dict[str, float]:
    """The calibration's core-s per audio-s by engine, plus an engine it lacks at its `relative_cost`
    times the calibration's piper rate (a note says so)."""
    from kame_data.speech.engines import DEFAULT_ENGINE, ENGINES

    rates = dict(cal["speak_core_s_per_audio_s"])
    for engine in engines:
        if engine in rates:
            continue
        rel = ENGINES[engine].relative_cost
        if rel is None or DEFAULT_ENGINE not in rates:
            raise ValueError(f"the calibration has no rate for the {engine} engine: run benchmarks/calibrate.py")
        rates[engine] = rates[DEFAULT_ENGINE] * rel
        notes.append(f"{engine}: not in the calibration; counted at {rel:g}x {DEFAULT_ENGINE}'s rate "
                     f"(the engine table's relative_cost; benchmarks/calibrate.py measures it)")
    return rates


def _mean(value: Any) -> float:
    """A pause setting as one number: a number, or the middle of [low, high]."""
    if isinstance(value, (list, tuple)):
        return (float(value[0]) + float(value[1])) / 2
    return float(value)


def _gap_mean(gap: GapConfig) -> float:
    if gap.distribution == "uniform":
        return (gap.low + gap.high) / 2
    return min(max(gap.mean, gap.min), gap.max)


def _turn_words(kind: str, style: str, llm: LlmScriptConfig,
                typical: tuple[float, float, int] | None = None) -> list[tuple[str, float]]:
    """(speaker, spoken words) for each turn of a typical dialogue of this source kind (`typical`:
    measured on the recipe's own rows, else TYPICAL_TURNS)."""
    user, assistant, n_turns = typical or TYPICAL_TURNS.get(kind, TYPICAL_TURNS["jsonl"])
    pairs = n_turns // 2
    user_turn, assistant_turn = user / pairs, assistant / pairs
    if style == "llm":
        user_turn = min(user_turn, float(llm.max_user_words))
        assistant_turn = max(assistant_turn, 0.75 * float(llm.max_assistant_words))
    return [t for _ in range(pairs) for t in (("B", user_turn), ("A", assistant_turn))]


def _synthetic_words(turns: list[tuple[str, float]], rates: dict[str, float], lead_in: float, gap: float) -> list[Word]:
    words, t = [], lead_in
    for speaker, n in turns:
        step = 1.0 / rates[speaker]
        for i in range(max(1, round(n))):
            words.append(Word(speaker, f"w{len(words)}", t, t + 0.8 * step))
            t += step
        t += gap
    return words


def _oracle_load(words: list[Word], oracle: OracleConfig) -> tuple[int, int]:
    """(calls, prompt characters) the oracle stage would send for one dialogue, after the cache
    has merged identical requests."""
    from kame_data.oracle.ladder import ladder
    from kame_data.oracle.stage import TARGETS
    from kame_data.records import CHANNEL

    steps = ladder(words, oracle.interval, TARGETS[oracle.target], CHANNEL,
                   only_new_words=oracle.trigger == "new_words")
    call_level5 = oracle.level5 == "call"
    seen: dict[tuple, int] = {}
    for s in steps:
        if s.level == 5 and not call_level5:
            continue
        key = (s.conversation_context, s.level, s.hint)
        seen.setdefault(key, len(s.conversation_context) + (len(s.hint) if s.level >= 1 else 0) + 420)
    return len(seen), sum(seen.values())


def plan_recipe(recipe: Recipe, rows: dict[str, str] | None = None, measure: bool = True) -> Plan:
    """The plan of a recipe; reads the recipe, counts rows of unlimited local files and, with
    `measure`, finds what a `dialogues` source keeps on its rows the way the run will (the filters,
    the draw and the script's verdicts: yields.measure_counts) where they are at hand: its local
    file, or `rows[source name]`, a local copy of a hub source's split. Elsewhere the whole-split
    calibration tells (yields.counts_from_calibration)."""
    cfg = RunConfig.resolve(recipe)  # the values the run will use, defaults included
    style, llm, speak, oracle = cfg.script.style, cfg.script.llm, cfg.speak, cfg.oracle
    shares = {role: cast_shares(speak.pool(role), speak.balance) for role in (ASSISTANT, USER)}
    calibration = load_calibration()
    measured_rates = calibration.get("words_per_second", {})  # by engine, on real script turns
    rates = {SPEAKER[role]: sum(share * words_per_second(v, measured_rates) for v, share in shares[role].items())
             for role in (ASSISTANT, USER)}
    gap, lead_in, tail = _gap_mean(speak.gap), _mean(speak.lead_in), _mean(speak.tail)
    default_variants = cfg.script.variants
    oracle_max_tokens = oracle.backend.max_tokens
    rewrite_max_tokens = llm.max_tokens
    backend = oracle.backend
    plan = Plan(recipe=recipe.name, style=style,
                prices=Prices(backend.prompt_price_per_million, backend.completion_price_per_million),
                budget_usd=cfg.budget_usd, qa=speak.qa.share(), qa_gpu=speak.qa.share(gpu=True),
                device=recipe.device)
    plan.step_parts = _step_costs(cfg)
    plan.steps = [spec.name for spec, _ in cfg.specs()]
    engines: dict[str, dict[str, float]] = {}  # speaker -> engine -> expected share of its speech
    for role in (ASSISTANT, USER):
        for v, share in shares[role].items():
            by_engine = engines.setdefault(SPEAKER[role], {})
            by_engine[v.engine] = by_engine.get(v.engine, 0.0) + share
    plan.voices = {role: _cast_summary(shares[role], role, speak) for role in (ASSISTANT, USER)}
    yields = calibration.get("yields", {})
    for spec in recipe.sources:
        plan.warnings += field_warnings(recipe, spec)
        items, items_from = source_items(recipe, spec)
        if spec.dialogues is not None:
            dialogues = spec.dialogues if items is None or spec.quota is not None else max(items, spec.dialogues)
        else:
            dialogues = None if items is None else items * (spec.variants or default_variants)
        name = spec.name or spec.kind
        sampled = sampled_turns(recipe, spec, cfg) if dialogues is not None else None
        counts = dialogue_counts(recipe, spec, cfg, (rows or {}).get(name), measure, yields)
        # a quota or per-category draw, and a limit (load_source stops after `limit` accepted items), count
        # items past the filters; a whole file counts rows
        drawn = items_from in ("quota", "per_category", "limit")
        whole = sampled is not None and ((items_from == "limit" and sampled.passed >= (spec.limit or 0))
                                         or (items_from == "rows" and sampled.read >= (items or 0)))  # all it reads
        if counts is not None:
            asked, dialogues = spec.dialogues, counts.kept
            plan.notes.append(counts.line(name))
        elif sampled and ((sampled.passed if drawn else sampled.read) >= MIN_YIELD_SAMPLE or whole):
            asked, dialogues = dialogues, round(dialogues * sampled.share(drawn))
            plan.notes.append(f"{name}: {asked:,} dialogues asked, {dialogues:,} expected: the filters and the "
                              f"script keep {sampled.share(drawn):.1%} of its first {sampled.read} items "
                              f"({sampled.passed} past the filters, {sampled.kept} scripted with the recipe's settings)")
        else:
            asked, dialogues = dialogues, after_yield(name, spec.kind, dialogues, items_from, style, yields, plan.notes)
        if sampled:
            plan.notes.append(f"{name}: turn lengths from {sampled.kept} of its own items scripted with the "
                              f"recipe's settings ({sampled.typical[0]:.0f} user + {sampled.typical[1]:.0f} "
                              "assistant words per dialogue)")
        turns = _turn_words(spec.kind, style, llm, sampled.typical if sampled else None)
        words = _synthetic_words(turns, rates, lead_in, gap)
        seconds = (words[-1].end + tail) if words else 0.0
        oracle_calls, oracle_chars = _oracle_load(words, oracle)
        spoken_words = sum(n for _, n in turns)
        per_dialogue_prompt = oracle_chars / CHARS_PER_TOKEN
        per_dialogue_completion = oracle_calls * min(oracle_max_tokens, ORACLE_REPLY_WORDS * TOKENS_PER_WORD)
        oracle_tokens = per_dialogue_prompt + per_dialogue_completion
        script_calls = 0 if style != "llm" else (asked or 0)  # every item is scripted, kept or not
        if style == "llm":
            per_dialogue_prompt += REWRITE_PROMPT_CHARS.get(spec.kind, 1500) / CHARS_PER_TOKEN
            per_dialogue_completion += min(rewrite_max_tokens, spoken_words * TOKENS_PER_WORD + 4 * len(turns))
        known = dialogues is not None
        if known:
            _add_load(plan, words, seconds * dialogues, engines, dialogues, oracle_calls, oracle_tokens,
                      backend.kind, script_calls, llm.backend.kind, per_dialogue_prompt + per_dialogue_completion)
        plan.sources.append(SourcePlan(
            source=spec.name or spec.kind, kind=spec.kind, origin=spec.path or spec.hub or "", items=items,
            items_from=items_from, dialogues=asked, kept=dialogues, seconds_per_dialogue=round(seconds, 1),
            audio_hours=round(dialogues * seconds / 3600, 1) if known else None,
            script_calls=script_calls if known else None,
            oracle_calls=dialogues * oracle_calls if known else None,
            prompt_tokens=round(dialogues * per_dialogue_prompt) if known else None,
            completion_tokens=round(dialogues * per_dialogue_completion) if known else None,
            passing=counts.passing if counts else None, shortfall=counts.shortfall if counts else None,
        ))
        if items is None:
            plan.notes.append(f"{spec.name or spec.kind}: a hub source without `quota` or `limit`: its size is "
                              "unknown until it is downloaded")
        elif items_from == "rows":
            plan.notes.append(f"{spec.name or spec.kind}: {items} rows in {spec.path}, before filters")
    plan.notes.append("audio and LLM figures are estimates (typical turn lengths per source, the recipe's voices "
                      "and oracle settings, identical requests counted once)")
    wasted = rewrite_note(((recipe.raw.get(ScriptStage.name) or {}).get("style") or "template"), cfg.script, calibration)
    if wasted:
        plan.notes.append(wasted)
    return plan


def _cast_summary(shares: dict, role: str, speak) -> dict[str, Any]:
    """What the plan says of a role's voices: how many, their engines' shares, and how many
    speakers a speaker model hears in them where `kame-data voices check` figures exist."""
    from kame_data.speech.voice_check import pool_summary

    engines: dict[str, float] = {}
    for v, share in shares.items():
        engines[v.engine] = engines.get(v.engine, 0.0) + share
    out: dict[str, Any] = {"voices": [v.label for v in shares], "engines": {k: round(x, 3) for k, x in engines.items()}}
    if role == USER:
        summary = pool_summary(speak.pool(ASSISTANT), speak.pool(USER))
        if summary:
            out["speakers"], out["measured"] = summary["speakers"], summary["measured"]
    return out


def _add_load(plan: Plan, words: list[Word], audio_s: float, engines: dict[str, dict[str, float]], dialogues: int,
              oracle_calls: int, oracle_tokens: float, oracle_kind: str, script_calls: int, script_kind: str,
              all_tokens: float) -> None:
    """Accumulate what the projection needs: audio seconds per engine (the dialogue's time split by
    who speaks), and per LLM stage its backend, calls and tokens."""
    spoken = {sp: sum(w.end - w.start for w in words if w.speaker == sp) for sp in engines}
    total = sum(spoken.values()) or 1.0
    for sp, by_engine in engines.items():
        for engine, share in by_engine.items():
            plan.speech_seconds[engine] = plan.speech_seconds.get(engine, 0.0) + audio_s * spoken[sp] / total * share
    o = plan.llm.setdefault(OracleStage.name, {"kind": oracle_kind, "calls": 0, "tokens": 0.0})
    o["calls"] += dialogues * oracle_calls
    o["tokens"] += dialogues * oracle_tokens
    if script_calls:
        s = plan.llm.setdefault(ScriptStage.name, {"kind": script_kind, "calls": 0, "tokens": 0.0})
        s["calls"] += script_calls
        s["tokens"] += dialogues * (all_tokens - oracle_tokens)
def _step_costs(cfg: RunConfig) -> dict[str, dict[str, float]]:
    """Per step, the core-s per audio second of each part the recipe switches on, as it declares them."""
    out: dict[str, dict[str, float]] = {}
    for spec, config in cfg.specs():
        parts = spec.cost(config) if spec.cost is not None else {}
        if parts:
            out[spec.name] = dict(parts)
    return out


def _fmt(v: int | float | None, digits: int = 0) -> str:
    if v is None:
        return "?"
    return f"{v:,.{digits}f}" if isinstance(v, float) and digits else f"{round(v):,}"


def format_plan(plan: Plan) -> str:
    """The plan as a table for the terminal."""
    head = f"{'source':<12} {'items':>9} {'dialogues':>10} {'kept':>10} {'s/dialogue':>10} {'audio h':>9} " \
           f"{'LLM calls':>12} {'prompt tok':>14} {'output tok':>13}"
    lines = [f"plan for recipe {plan.recipe!r} (script style: {plan.style})",
             "steps: " + " -> ".join(plan.steps) + " (kame-data steps)", "", head, "-" * len(head)]

    def row(name, items, dialogues, kept, secs, hours, calls, prompt, completion):
        return (f"{name:<12} {_fmt(items):>9} {_fmt(dialogues):>10} {_fmt(kept):>10} {secs:>10} {_fmt(hours, 1):>9} "
                f"{_fmt(calls):>12} {_fmt(prompt):>14} {_fmt(completion):>13}")

    for s in plan.sources:
        calls = None if s.oracle_calls is None else s.oracle_calls + (s.script_calls or 0)
        lines.append(row(s.source, s.items, s.dialogues, s.kept, f"{s.seconds_per_dialogue:.0f}", s.audio_hours, calls,
                         s.prompt_tokens, s.completion_tokens))
    t = plan.to_dict()["totals"]
    calls = None if t["oracle_calls"] is None else t["oracle_calls"] + (t["script_calls"] or 0)
    lines += ["-" * len(head), row("total", t["items"], t["dialogues"], t["kept"], "", t["audio_hours"], calls,
                                   t["prompt_tokens"], t["completion_tokens"])]
    if plan.style == "llm" and t["script_calls"] is not None:
        lines.append(f"LLM calls: {_fmt(t['script_calls'])} script rewrites + {_fmt(t['oracle_calls'])} oracle "
                     f"predictions (before retries)")
    cost = plan.cost_usd
    if plan.prices.prompt_per_million or plan.prices.completion_per_million:
        lines.append(f"estimated cost: ${_fmt(cost, 2)} at ${plan.prices.prompt_per_million:g} / "
                     f"${plan.prices.completion_per_million:g} per million prompt / output tokens")
        if plan.budget_usd is not None and cost is not None and cost > plan.budget_usd:
            lines.append(f"budget: ${plan.budget_usd:g} will stop the run at about "
                         f"{plan.budget_usd / cost:.0%} of the way (it publishes what is done)")
    else:
        lines.append("estimated cost: $0 (no price table: set oracle.backend.prompt_price_per_million and "
                     "completion_price_per_million for a paid API)")
    for role, v in plan.voices.items():
        heard = (f"; {v['speakers']} speakers to the screen (both speaker encoders; {v['measured']} of {len(v['voices'])} voices "
                 "measured by `kame-data voices check`)") if "speakers" in v else ""
        engines = ", ".join(f"{e} {x:.0%}" for e, x in sorted(v["engines"].items(), key=lambda kv: -kv[1]))
        names = ", ".join(v["voices"][:10]) + (", ..." if len(v["voices"]) > 10 else "")
        lines.append(f"{role} voices: {len(v['voices'])} ({names}); engines by share of dialogues: {engines}{heard}")
    lines += [""] + [f"warning: {w}" for w in plan.warnings] + [f"note: {n}" for n in plan.notes]
    if plan.projection is not None:
        lines += [""] + format_projection(plan.projection)
    return "\n".join(lines)

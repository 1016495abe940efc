"""`kame-data plan`: totals from the recipe alone, nothing downloaded or run."""

from collections import Counter
import json
from pathlib import Path
import subprocess

import pytest
import yaml

from kame_data.plan.planner import format_plan, plan_recipe
from kame_data.recipe import load_recipe
from tests.conftest import CLI

PAPER = {"mmlu_pro": (11996, 22800), "gsm8k": (7428, 11742), "hssbench": (12012, 22040)}


@pytest.fixture
def no_downloads(monkeypatch):
    """Any attempt to reach the hub fails the test."""
    import datasets

    def refuse(*a, **k):
        raise AssertionError("plan must not load datasets")

    monkeypatch.setattr(datasets, "load_dataset", refuse)


def test_kame_paper_mix(no_downloads):
    plan = plan_recipe(load_recipe("recipes/kame_paper.yaml"))
    split = {s.source: (s.items, s.dialogues) for s in plan.sources}
    assert split == PAPER
    totals = plan.to_dict()["totals"]
    assert totals["dialogues"] == 56582 and totals["items"] == 31436
    # script.style auto with the embedded rewrite model: the template, no rewrite paid for (its rewrites
    # fall back to the template; the calibration measured it), and the plan says why
    assert totals["script_calls"] == 0 and plan.style == "template"
    assert any(n.startswith("script.style auto is template here") and "100%" in n for n in plan.notes), plan.notes
    assert totals["oracle_calls"] > 20 * 56582 and totals["prompt_tokens"] > totals["completion_tokens"] > 0
    assert 300 < totals["audio_hours"] < 2000
    text = format_plan(plan)
    assert "56,582" in text and "22,800" in text and "11,742" in text and "22,040" in text


def test_kame_paper_rewrites_with_a_served_model(no_downloads, tmp_path):
    """style auto rewrites when script.llm.backend is a served model: the paper's one LLM call per dialogue;
    style llm with the embedded model is planned as asked, with a note that the rewrites are wasted."""
    raw = yaml.safe_load(Path("recipes/kame_paper.yaml").read_text())
    raw["script"]["llm"]["backend"] = {"kind": "openai", "model": "gpt-4.1-mini"}
    served = tmp_path / "served.yaml"
    served.write_text(yaml.safe_dump(raw))
    plan = plan_recipe(load_recipe(served))
    assert plan.style == "llm" and plan.to_dict()["totals"]["script_calls"] == 56582
    assert not any("thrown away" in n or "auto is template" in n for n in plan.notes)
    raw["script"]["llm"].pop("backend")
    raw["script"]["style"] = "llm"
    embedded = tmp_path / "embedded.yaml"
    embedded.write_text(yaml.safe_dump(raw))
    plan = plan_recipe(load_recipe(embedded))
    assert plan.to_dict()["totals"]["script_calls"] == 56582
    assert any("mostly thrown away" in n for n in plan.notes), plan.notes


def test_cli_plan_prints_the_split():
    r = subprocess.run(CLI + ["plan", "recipes/kame_paper.yaml"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    total = next(line for line in r.stdout.splitlines() if line.startswith("total"))
    assert "31,436" in total and "56,582" in total
    for source, (items, dialogues) in PAPER.items():
        line = next(line for line in r.stdout.splitlines() if line.startswith(source))
        assert f"{items:,}" in line and f"{dialogues:,}" in line
    j = subprocess.run(CLI + ["plan", "kame_paper", "--json"], capture_output=True, text=True, timeout=120)
    assert json.loads(j.stdout)["totals"]["dialogues"] == 56582


def test_mt_bench_eval_plan(no_downloads):
    plan = plan_recipe(load_recipe("mt_bench_eval"))
    (src,) = plan.sources
    assert (src.items, src.dialogues, src.items_from) == (30, 30, "per_category")
    assert src.script_calls == 30 and src.seconds_per_dialogue > 30


def test_quickstart_plan_counts_local_rows():
    plan = plan_recipe(load_recipe("quickstart"))
    assert [(s.source, s.items, s.items_from) for s in plan.sources] == [
        ("mmlu_pro", 4, "rows"), ("gsm8k", 4, "rows"), ("hssbench", 5, "rows")]
    assert plan.to_dict()["totals"]["script_calls"] == 0  # template style: the oracle is the only LLM user
    assert any("before filters" in n for n in plan.notes)


def test_hub_source_without_quota_is_unknown(tmp_path, no_downloads):
    p = tmp_path / "r.yaml"
    p.write_text("name: x\nsources: [{kind: gsm8k, hub: openai/gsm8k, config: main}]\n")
    plan = plan_recipe(load_recipe(p))
    assert plan.sources[0].items is None and plan.to_dict()["totals"]["dialogues"] is None
    assert "?" in format_plan(plan) and any("unknown" in n for n in plan.notes)


def test_oracle_settings_change_the_estimate(tmp_path):
    base = "name: x\nsources: [{kind: gsm8k, hub: h, quota: 100}]\n"
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(base + "oracle: {interval: 0.5}\n")
    b.write_text(base + "oracle: {interval: 1.0}\n")
    calls_a = plan_recipe(load_recipe(a)).sources[0].oracle_calls
    calls_b = plan_recipe(load_recipe(b)).sources[0].oracle_calls
    assert calls_b < calls_a


def test_plan_prices_and_budget(tmp_path):
    from kame_data.plan.planner import format_plan, plan_recipe
    from kame_data.recipe import load_recipe

    p = tmp_path / "priced.yaml"
    p.write_text("name: priced\nsources:\n  - {kind: gsm8k, hub: openai/gsm8k, config: main, split: test, quota: 1000}\n"
                 "oracle:\n  budget_usd: 0.5\n  backend: {kind: openai, model: gpt-4.1-nano, "
                 "prompt_price_per_million: 0.10, completion_price_per_million: 0.40}\n")
    plan = plan_recipe(load_recipe(p))
    t = plan.to_dict()["totals"]
    assert t["cost_usd"] == pytest.approx((t["prompt_tokens"] * 0.10 + t["completion_tokens"] * 0.40) / 1e6)
    text = format_plan(plan)
    assert "estimated cost: $" in text and "budget: $0.5 will stop the run" in text


def test_the_plan_counts_what_the_script_keeps(monkeypatch, no_downloads, tmp_path):
    """A source's dialogues shrink by the share of its rows the calibration saw the script keep
    (`benchmarks/calibrate.py --only yields`); audio, calls and tokens follow the kept dialogues."""
    import kame_data.plan.planner as plan_mod

    cal = {k: v for k, v in plan_mod.load_calibration().items() if k != "yields"}
    yields = {"measured": "2026-12-03", "kinds": {"mmlu_pro": {
        "rows": 300, "kept": 0.7, "script_kept": 0.75,
        "rejects": {"sources": {"needs_image": 0.05}, "script": {"too_long": 0.188}}}}}
    monkeypatch.setattr(plan_mod, "load_calibration", lambda: cal)
    template = tmp_path / "paper_template.yaml"
    raw = yaml.safe_load(Path("recipes/kame_paper.yaml").read_text())
    raw["script"] = {**raw.get("script", {}), "style": "template"}
    for s in raw["sources"]:
        if s.get("path"):
            s["path"] = str(Path("recipes") / s["path"])
    template.write_text(yaml.safe_dump(raw))
    full = plan_recipe(load_recipe(template))
    monkeypatch.setattr(plan_mod, "load_calibration", lambda: {**cal, "yields": yields})
    plan = plan_recipe(load_recipe(template))
    raw["script"]["style"] = "llm"
    llm_recipe = tmp_path / "paper_llm.yaml"
    llm_recipe.write_text(yaml.safe_dump(raw))
    llm_style = plan_recipe(load_recipe(llm_recipe))  # a quota, and rewrites the template's rejects do not measure
    assert next(s for s in llm_style.sources if s.kind == "mmlu_pro").kept == 22800
    mmlu = next(s for s in plan.sources if s.kind == "mmlu_pro")
    before = next(s for s in full.sources if s.kind == "mmlu_pro")
    assert mmlu.dialogues == before.dialogues == 22800 and mmlu.kept == 17100
    assert mmlu.oracle_calls == round(before.oracle_calls * 0.75)
    # the paper recipe samples a quota from the items past the source filters: the script's share only
    assert any(n.startswith("mmlu_pro: 22,800 dialogues asked, 17,100 expected") and "too_long 18.8%" in n
               and "needs_image" not in n for n in plan.notes), plan.notes
    gsm = [s for s in plan.sources if s.kind == "gsm8k"]
    assert all(s.kept == s.dialogues for s in gsm)  # no yield stored for it here: nothing assumed
    assert "17,100" in format_plan(plan)


# ---------------------------------------------------------------- dialogue counts (issue: the paper's size)

COUNTED = {"mmlu_pro": ("mmlu_pro_test_300.jsonl", 250, 500), "gsm8k": ("gsm8k_test_200.jsonl", None, 450),
           "hssbench": ("hssbench_own.jsonl", None, 100)}


def _counted_recipe(tmp_path, fixtures_dir) -> Path:
    sources = []
    for kind, (name, quota, dialogues) in COUNTED.items():
        sources.append({"kind": kind, "path": str(fixtures_dir / name), "dialogues": dialogues,
                        **({"quota": quota} if quota else {})})
    p = tmp_path / "counted.yaml"
    p.write_text(yaml.safe_dump({"name": "counted", "seed": 20250601, "sources": sources,
                                 "script": {"mmlu_options": "subset", "max_options": 4}}))
    return p


def test_plan_measures_what_run_until_script_keeps(tmp_path, fixtures_dir, no_downloads):
    """Local rows are at hand: the plan counts each source's dialogues the way the run does, and the
    run's scripts.jsonl holds exactly that many per source, short where the plan said, for the reasons it said."""
    recipe = _counted_recipe(tmp_path, fixtures_dir)
    plan = {s.source: s for s in plan_recipe(load_recipe(recipe)).sources}
    out = tmp_path / "out"
    r = subprocess.run(CLI + ["run", str(recipe), "--out", str(out), "--until", "script", "-q"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    made = Counter(json.loads(line)["source"] for line in (out / "scripts.jsonl").read_text().splitlines())
    for kind, (_, _, asked) in COUNTED.items():
        assert plan[kind].kept == made[kind], (kind, plan[kind], made)
        assert plan[kind].shortfall == asked - made[kind]
    assert plan["mmlu_pro"].shortfall == 0 and plan["gsm8k"].shortfall == 0
    assert plan["hssbench"].shortfall > 0  # 41 own rows: too few items for 100 dialogues at 4 variants each
    line = next(x for x in r.stdout.splitlines() if x.strip().startswith("hssbench:"))
    assert f"{made['hssbench']} of 100 dialogues asked" in line and "short (max_variants" in line


def test_whole_split_calibration_counts_like_the_run(tmp_path, fixtures_dir):
    """The shipped figures of a whole split (yields.split_capacity) give the count the run makes on it,
    at any max_variants they measured and for any count asked."""
    from dataclasses import replace

    from kame_data.runner.config import RunConfig
    from kame_data.plan.yields import counts_from_calibration, measure_counts, split_capacity

    recipe = load_recipe(_counted_recipe(tmp_path, fixtures_dir))
    cfg = RunConfig.resolve(recipe)
    spec = recipe.sources[0]
    figures = split_capacity(recipe, spec, cfg)
    splits = {"mmlu_pro": {**figures, "measured": "today", "split": "fixture", "command": "test"}}
    for dialogues, cap in ((500, 4), (700, 3), (900, 4), (200, 1)):
        asked = replace(spec, quota=None, dialogues=dialogues, max_variants=cap)
        counted = counts_from_calibration(asked, cfg, splits)
        measured = measure_counts(recipe, asked, cfg)
        assert counted.kept == measured.dialogues and counted.passing == measured.passed, (dialogues, cap)
        assert counted.shortfall == measured.shortfall
        if counted.shortfall:
            assert sum(counted.reasons.values()) == counted.shortfall and counted.remedies


def test_the_paper_plan_counts_from_whole_splits(no_downloads):
    """Hub sources: the shipped calibration of whole splits says what each keeps, HSSBench short."""
    plan = plan_recipe(load_recipe("recipes/kame_paper.yaml"))
    by = {s.source: s for s in plan.sources}
    assert by["mmlu_pro"].kept == 22800 and by["gsm8k"].kept == 11742
    assert 0 < by["hssbench"].kept < 22040 and by["hssbench"].shortfall == 22040 - by["hssbench"].kept
    note = next(n for n in plan.notes if n.startswith("hssbench:"))
    assert "whole" in note and "calibrate.py --only yields" in note and "max_variants" in note

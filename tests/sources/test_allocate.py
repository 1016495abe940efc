"""A source's `dialogues` met over the items that pass, refused scripts replaced by other variants,
the per-item cap and the shortfall (kame_data/sources/allocate.py), on MMLU-Pro-format rows written
here: short questions, questions the script can never fit in its turn, and one it fits in some of its
variants only (found with the real template, so the test follows the script's wording)."""

import json
import subprocess
from collections import Counter

import pytest
import yaml

from kame_data.recipe import load_recipe
from kame_data.records import Dialogue, Reject, SourceItem
from kame_data.runner.config import RunConfig
from kame_data.script.config import ScriptConfig
from kame_data.script.template import script_batch, script_checks, verdict
from kame_data.sources.step import SourcesStep
from tests.conftest import CLI

SEED = 7
TURN_SECONDS = 20  # script.max_turn_seconds, below the filters' 45 s: long questions pass the filters
OPTIONS = ["the Amber", "the Birch", "the Cedar river of the far hills", "the Delta"]
TOPICS = ["river", "bridge", "market", "harbour", "castle", "forest", "valley", "island", "mill", "lake"]
FILLER = "which of these rivers crosses the old stone bridge near the northern market town".split()


def _row(i: int, question: str) -> dict:
    return {"question_id": i, "question": question, "options": OPTIONS, "answer": "B", "answer_index": 1,
            "cot_content": "", "category": "geography", "src": "own"}


def _item(i: int, question: str) -> SourceItem:
    return SourceItem(id=f"mmlu_pro-{i}", source="mmlu_pro", category="geography", question=question,
                      options=OPTIONS, answer="the Birch", answer_letter="B")


def _mixed_question() -> tuple[str, list[bool]]:
    """A question the template fits in some of its first four variants and not in others."""
    judge = verdict(ScriptConfig(max_turn_seconds=TURN_SECONDS), SEED)
    for n in range(30, 70):
        q = " ".join((FILLER * 6)[:n]) + "?"
        ok = [judge(_item(99, q), v) is None for v in range(4)]
        if any(ok) and not all(ok) and not ok[0]:
            return q, ok
    raise AssertionError("no question length gives mixed verdicts: the template's wording changed a lot")


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    """10 short items, 2 the script never fits (every variant too_long), 1 it fits in some variants."""
    mixed, ok = _mixed_question()
    rows = [_row(i, f"Which of these flows past the {t} in the story?") for i, t in enumerate(TOPICS)]
    rows += [_row(10 + i, " ".join(([t] + FILLER) * 6) + "?") for i, t in enumerate(["north", "south"])]
    rows.append(_row(99, mixed))
    path = tmp_path_factory.mktemp("rows") / "own_mmlu_pro.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, ok


def _recipe(tmp_path, path, name="alloc", **source) -> "Recipe":  # noqa: F821
    raw = {"name": name, "seed": SEED, "sources": [{"kind": "mmlu_pro", "path": str(path), **source}],
           "script": {"max_turn_seconds": TURN_SECONDS}}
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(raw))
    return load_recipe(p)


def _allocate(recipe, limit=None):
    cfg = RunConfig.resolve(recipe)
    step = SourcesStep(recipe, cfg.filters, limit, **script_checks(cfg))
    items, rejects = step.items()
    return items, rejects, step.allocations["mmlu_pro"], cfg


def test_count_is_met_by_refilling_refused_variants(tmp_path, rows):
    path, ok = rows
    items, rejects, alloc, cfg = _allocate(_recipe(tmp_path, path, dialogues=26))
    given = {it.id: it.variant_numbers for it in items}
    assert sum(map(len, given.values())) == 26 and alloc.dialogues == 26 and alloc.shortfall == 0
    assert "mmlu_pro-10" not in given and "mmlu_pro-11" not in given  # never fits: no dialogue
    assert alloc.items_lost == 2 and alloc.items == 13
    # the mixed item scripts only variants the template takes, the first of them in place of variant 0
    assert given["mmlu_pro-99"] and all(ok[v] for v in given["mmlu_pro-99"])
    assert given["mmlu_pro-99"][0] == ok.index(True)
    # the even spread: every short item 2 or 3 (26 over 10 items and the mixed one's first)
    short = [len(v) for k, v in given.items() if k != "mmlu_pro-99"]
    assert max(short) - min(short) <= 1 and max(map(len, given.values())) <= 4
    # every refused variant is a reject with the script's reason, counted in the allocation
    refused = [r for r in rejects if r.stage == "script"]
    assert Counter(r.reason for r in refused) == alloc.refused == Counter(too_long=len(refused))
    assert {r.id for r in refused} >= {f"mmlu_pro-{i}-v{v}" for i in (10, 11) for v in range(4)}
    # the script step refuses none of what it was handed
    out = script_batch(items, cfg.script, SEED)
    assert all(isinstance(d, Dialogue) for d in out) and len(out) == 26
    assert sorted(d.id for d in out) == sorted(f"{k}-v{v}" for k, vs in given.items() for v in vs)


def test_the_cap_and_the_shortfall_with_its_reasons(tmp_path, rows):
    path, ok = rows
    items, _, alloc, _ = _allocate(_recipe(tmp_path, path, dialogues=60))
    fits = sum(ok)  # the mixed item's variants the template takes
    assert alloc.dialogues == 40 + fits == sum(it.variants for it in items)
    assert all(len(it.variant_numbers) <= 4 for it in items)
    assert alloc.shortfall == 60 - 40 - fits
    reasons = alloc.reasons()
    assert sum(reasons.values()) == alloc.shortfall
    assert reasons == {"max_variants": 60 - 13 * 4, "too_long": 13 * 4 - 40 - fits}
    assert "short (max_variants 8" in alloc.describe()
    # a larger cap meets it
    _, _, wider, _ = _allocate(_recipe(tmp_path, path, dialogues=60, max_variants=6))
    assert wider.shortfall == 0


def test_fill_ratio_keeps_the_dialogues_per_item(tmp_path, rows):
    path, _ = rows
    _, _, count, _ = _allocate(_recipe(tmp_path, path, quota=26, dialogues=26))  # 13 items pass, half the quota
    _, _, ratio, _ = _allocate(_recipe(tmp_path, path, quota=26, dialogues=26, fill="ratio"))
    assert count.dialogues == 26 and count.shortfall == 0
    assert ratio.target == 13 and ratio.dialogues == 13 and ratio.reasons() == {"fewer_items": 13}


def _until_script(tmp_path, path, name, **extra) -> tuple[list[str], str]:
    raw = {"name": name, "seed": SEED, "sources": [{"kind": "mmlu_pro", "path": str(path), "dialogues": 26}],
           "script": {"max_turn_seconds": TURN_SECONDS}, **extra}
    recipe = tmp_path / f"{name}.yaml"
    recipe.write_text(yaml.safe_dump(raw))
    out = tmp_path / name
    r = subprocess.run(CLI + ["run", str(recipe), "--out", str(out), "--until", "script", "-q"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    scripts = [json.loads(line) for line in (out / "scripts.jsonl").read_text().splitlines()]
    return [json.dumps(s, sort_keys=True) for s in scripts], r.stdout


def test_run_until_script_gives_the_count_the_same_whatever_the_workers(tmp_path, rows):
    path, _ = rows
    one, said = _until_script(tmp_path, path, "one", workers=1, batch_size=2)
    two, _ = _until_script(tmp_path, path, "two", workers=2, batch_size=16)
    again, _ = _until_script(tmp_path, path, "one", workers=1, batch_size=2)  # a rerun over its checkpoints
    assert len(one) == 26 and one == two == again
    assert "mmlu_pro: 26 of 26 dialogues asked, from 13 items" in said
    rejects = [json.loads(line) for line in (tmp_path / "one" / "rejects.jsonl").read_text().splitlines()]
    assert {r["reason"] for r in rejects if r["stage"] == "script"} == {"too_long"}


def test_a_limit_run_spreads_without_verdicts(tmp_path, rows):
    """--limit scripts a few items: the allocation does not judge the whole source first."""
    path, _ = rows
    items, rejects, alloc, _ = _allocate(_recipe(tmp_path, path, dialogues=26), limit=3)
    assert len(items) == 3 and not alloc.refused and not [r for r in rejects if isinstance(r, Reject)
                                                           and r.stage == "script"]

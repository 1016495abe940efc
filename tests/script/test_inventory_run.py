"""Issue 66, acceptance 1: the inventory check runs on every turn of a run; its refusals carry reason codes
into rejects.jsonl (from which the manifest and the card's reject table count them) and the plan's yields
(the allocation's reasons)."""

from __future__ import annotations

import json
import subprocess

import yaml

from kame_data.recipe import load_recipe
from kame_data.runner.config import RunConfig
from kame_data.script.template import script_checks
from kame_data.sources.step import SourcesStep
from kame_data.text.inventory import AMBIGUOUS, GARBLED
from tests.conftest import CLI

ROWS = [
    {"q": "What is 60 - 25 in a word problem about apples?", "a": "35"},
    {"q": "Read the letter \\cyrchar\\CYRA aloud. Which letter is it?", "a": "A"},  # an unknown LaTeX command
    {"q": "The caf\ufffd sells tea for 2 dollars. What does tea cost?", "a": "2 dollars"},  # a lost character
    {"q": "If Q = 60 - P and P = 20, what is Q?", "a": "40"},
]


def _recipe(tmp_path, **source):
    rows = tmp_path / "own.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    raw = {"name": "inventory", "seed": 3,
           "sources": [{"kind": "jsonl", "name": "own", "path": str(rows), "license": "CC0-1.0",
                        "fields": {"question": "q", "answer": "a"}, **source}]}
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_refusals_reach_rejects_jsonl(tmp_path):
    """The manifest counts rejects.jsonl by reason and the card lists them (tests/dataset/test_publish.py)."""
    out = tmp_path / "out"
    r = subprocess.run(CLI + ["run", str(_recipe(tmp_path)), "--out", str(out), "--until", "script", "-q"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    scripts = [json.loads(line) for line in (out / "scripts.jsonl").read_text().splitlines()]
    spoken = " ".join(t["spoken"] for s in scripts for t in s["turns"])
    assert "sixty minus P" in spoken and "sixty minus twenty five" in spoken
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    reasons = {r["reason"] for r in rejects if r["stage"] == "script"}
    assert reasons == {AMBIGUOUS, GARBLED}, rejects


def test_the_plans_yields_count_the_refusals(tmp_path):
    recipe = load_recipe(_recipe(tmp_path, dialogues=8))
    cfg = RunConfig.resolve(recipe)
    step = SourcesStep(recipe, cfg.filters, None, **script_checks(cfg))
    items, _ = step.items()
    alloc = step.allocations["own"]
    assert alloc.dialogues == 8 and len(items) == 2  # the two rows every variant of which reads right
    assert set(alloc.refused) == {AMBIGUOUS, GARBLED} and set(alloc.reasons()) <= {AMBIGUOUS, GARBLED}

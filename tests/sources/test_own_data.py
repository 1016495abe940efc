"""The own-data path as a new user walks it (issue 65): five items of their own in JSONL, a
`kind: jsonl` source with a `fields:` mapping. What they hit, each pinned: the declared licence
reaches the card whatever the source kind, `plan` warns when a field matches no row, the run says
its rejects by reason, `--help` tells of `kind: jsonl`, and the card says what QA and decoding need."""

import json
import subprocess

import pytest
import yaml

from kame_data.dataset.card import render_card
from kame_data.dataset.speech_card import round_trip_lines
from kame_data.recipe import load_recipe
from kame_data.records import Reject, reasons_line
from kame_data.runner.manifest import _licenses
from kame_data.sources import KINDS, parser_for
from tests.conftest import CLI

ROWS = [{"q": f"What is {n} plus {n}?", "a": str(2 * n), "topic": "math"} for n in range(1, 6)]


def _recipe(tmp_path, **source):
    (tmp_path / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    spec = {"kind": "jsonl", "name": "mine", "path": "mine.jsonl", "fields": {"question": "q", "answer": "a"}} | source
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump({"name": "own", "seed": 1, "sources": [spec],
                                    "script": {"style": "template"}}))
    return path


def _manifest(recipe, source: str) -> dict:
    return {"format": "kame-data/1", "recipe": recipe.raw, "recipe_name": recipe.name, "config_hash": "0" * 16,
            "versions": {}, "counts": {"samples": 5}, "per_source": {source: 5}, "licenses": _licenses(recipe),
            "rejects": {}, "timings": {}, "levels": {}, "audio_hours": 0.0, "oracle_events": 0,
            "shards": [{"path": "data/train-00000-of-00001.parquet", "split": "train", "rows": 5, "bytes": 10}]}


@pytest.mark.parametrize("kind", KINDS)
def test_the_card_keeps_a_declared_licence_of_every_source_kind(tmp_path, kind):
    """The manifest keys licences as the rows' `source` (a jsonl source's `name`), the key the card
    looks them up by: a declared licence is on the card, with no redistribution warning."""
    extra = {} if kind == "jsonl" else {"name": None, "fields": None}
    recipe = load_recipe(_recipe(tmp_path, kind=kind, license="cc-by-4.0", **extra))
    spec = recipe.sources[0]
    if kind == "jsonl":  # the items the run makes carry that same name
        assert parser_for(spec)(ROWS[0], 0).source == spec.source == "mine"
    card = render_card(_manifest(recipe, spec.source))
    header = yaml.safe_load(card.split("---\n", 2)[1])
    assert header["license"] == "cc-by-4.0"
    assert f"| {spec.source} |" in card and "cc-by-4.0 |" in card
    assert "no stated license" not in card


def test_plan_warns_when_a_fields_mapping_matches_no_row(tmp_path):
    from kame_data.plan.planner import format_plan, plan_recipe

    good = plan_recipe(load_recipe(_recipe(tmp_path)))
    assert good.warnings == []
    wrong = plan_recipe(load_recipe(_recipe(tmp_path, fields={"question": "question", "answer": "a",
                                                              "category": "subject"})))
    assert [w.split(":")[2].strip() for w in wrong.warnings] == ["question", "category"]
    assert "matches no field of the first 5 rows (they have: a, q, topic)" in wrong.warnings[0]
    assert "warning: mine: fields: question: 'question' matches no field" in format_plan(wrong)
    assert wrong.to_dict()["warnings"] == wrong.warnings


def test_a_run_whose_items_are_all_rejected_says_why(tmp_path):
    """A mapping that matches nothing: the run stops at the sources, with the rejects by reason."""
    recipe = _recipe(tmp_path, fields={"question": "question", "answer": "a"})
    r = subprocess.run(CLI + ["run", str(recipe), "--out", str(tmp_path / "out"), "--quiet"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert "no source items to process (5 rejected: malformed_question 5;" in r.stderr


def test_the_run_summary_gives_rejects_by_reason():
    from kame_data.cli.main import _by_reason

    rejects = [Reject("sources", "a", "too_long"), Reject("script", "b", "malformed_answer"),
               Reject("sources", "c", "too_long")]
    assert _by_reason(rejects) == "3: too_long 2, malformed_answer 1"
    assert _by_reason({"needs_image": 1, "too_long": 4}) == "5: too_long 4, needs_image 1"
    assert _by_reason({}) == "0"
    many = {f"r{i}": 1 for i in range(8)}
    assert reasons_line(many, most=6).endswith("r5 1, 2 more reasons 2")


def test_help_tells_of_the_jsonl_kind_and_its_fields():
    r = subprocess.run(CLI + ["run", "--help"], capture_output=True, text=True, timeout=60)
    assert "kind: jsonl" in r.stdout and "fields:" in r.stdout and "question" in r.stdout
    r = subprocess.run(CLI + ["plan", "--help"], capture_output=True, text=True, timeout=60)
    assert "kind: jsonl" in r.stdout and "fields:" in r.stdout


def test_the_card_says_whisper_heard_nothing_with_qa_off_and_how_to_decode(tmp_path):
    assert "Off: the recipe leaves `speak.qa` off" in "\n".join(round_trip_lines({}, {}))
    assert round_trip_lines({}, {"qa": {"enabled": True}}) == []  # on, with nothing heard yet: no section
    recipe = load_recipe(_recipe(tmp_path))
    card = render_card(_manifest(recipe, "mine"))
    assert "Audio(decode=False)" in card and "torchcodec" in card

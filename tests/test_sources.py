"""Source adapters on the real fixture rows (../shared/fixtures/sources)."""

import json
from collections import Counter

import pytest

from kame_data.records import Reject, SourceItem
from kame_data.recipe import SourceSpec
from kame_data.schema import validate
from kame_data.sources import load_source
from kame_data.sources.rows import SourceError, read_rows
from kame_data.script.template import ScriptConfig, script_batch

FILES = {
    "mmlu_pro": ["mmlu_pro_test_300.jsonl", "mmlu_pro_validation.jsonl"],
    "gsm8k": ["gsm8k_test_200.jsonl"],
    "hssbench": ["hssbench_sample.jsonl"],
}


def _load(fixtures_dir, kind, name):
    return list(load_source(SourceSpec(kind=kind, path=str(fixtures_dir / name))))


@pytest.mark.parametrize("kind,name", [(k, n) for k, names in FILES.items() for n in names])
def test_fixture_rows_parse_and_script(fixtures_dir, kind, name):
    results = _load(fixtures_dir, kind, name)
    rows = sum(1 for _ in read_rows(path=fixtures_dir / name))
    assert len(results) == rows
    items = [r for r in results if isinstance(r, SourceItem)]
    for item in items:
        validate("source_item", item.to_dict())
    for r in results:
        if isinstance(r, Reject):
            validate("reject", r.to_dict())
    dialogues = script_batch(items, ScriptConfig(), seed=0)
    assert len(dialogues) == len(items)
    for d in dialogues:
        if isinstance(d, Reject):
            validate("reject", d.to_dict())
        else:
            validate("dialogue", d.to_dict())


def test_gsm8k_answers_lose_calculator_notes(fixtures_dir):
    items = [r for r in _load(fixtures_dir, "gsm8k", "gsm8k_test_200.jsonl") if isinstance(r, SourceItem)]
    assert len(items) == 200
    first = items[0]
    assert first.answer == "18"
    assert "<<" not in first.explanation and "####" not in first.explanation


def test_hssbench_image_questions_rejected(fixtures_dir):
    results = _load(fixtures_dir, "hssbench", "hssbench_sample.jsonl")
    reasons = Counter(r.reason for r in results if isinstance(r, Reject))
    assert reasons["needs_image"] >= 10
    kept = [r for r in results if isinstance(r, SourceItem)]
    assert kept, "some text-only HSSBench questions must survive"
    for r in results:
        if isinstance(r, Reject) and r.reason == "needs_image":
            assert r.detail


def test_hssbench_odd_answers_do_not_crash():
    rows = [
        {"id": "x1", "question": "Which are rivers?", "options": {"A": "Nile", "B": "Alps", "C": "Rhine", "D": "Gobi"},
         "correct_answer": "A,C", "category": "Geography"},
        {"id": "x2", "question": "Pick one", "options": {"A": "a", "B": "b"}, "correct_answer": "b", "category": "Art"},
        {"id": "x3", "question": "Pick one", "options": {"A": "a", "B": "b"}, "correct_answer": "Z", "category": "Art"},
    ]
    from kame_data.sources.hssbench import parse_row

    out = [parse_row(r, i) for i, r in enumerate(rows)]
    assert isinstance(out[0], SourceItem) and out[0].answer_letter == "A,C" and out[0].answer == "Nile and Rhine"
    assert isinstance(out[1], SourceItem) and out[1].answer_letter == "B"
    assert isinstance(out[2], Reject) and out[2].reason == "malformed_answer"


def test_bad_jsonl_names_file_and_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"question": "ok", "answer": "#### 1"}\n{not json}\n')
    with pytest.raises(SourceError, match=r"bad.jsonl:2"):
        list(read_rows(path=p))


def test_parquet_and_json_sources(tmp_path, fixtures_dir):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(l) for l in (fixtures_dir / "gsm8k_test_200.jsonl").read_text().splitlines()[:5]]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "g.parquet")
    (tmp_path / "g.json").write_text(json.dumps(rows))
    a = list(load_source(SourceSpec(kind="gsm8k", path=str(tmp_path / "g.parquet"))))
    b = list(load_source(SourceSpec(kind="gsm8k", path=str(tmp_path / "g.json"))))
    assert [x.id for x in a] == [x.id for x in b] and len(a) == 5


def test_hub_loading_uses_datasets(tmp_path, fixtures_dir, monkeypatch):
    """The hub path goes through datasets.load_dataset; here a local dataset folder stands in for the hub."""
    import shutil

    repo = tmp_path / "openai_gsm8k"
    (repo / "main").mkdir(parents=True)
    shutil.copy(fixtures_dir / "gsm8k_test_200.jsonl", repo / "main" / "test.jsonl")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    items = list(load_source(SourceSpec(kind="gsm8k", hub=str(repo), split="test", limit=3)))
    assert len(items) == 3 and all(isinstance(i, SourceItem) for i in items)

"""Source rows of the wrong shape, JSON nested too deep, our own bugs on one row, and ids that need
sanitising: each is one reject (or one distinct item), never the end of the run."""

import hashlib
import json
import logging
import random
import textwrap
from collections import Counter

import os
import subprocess
import time

import pytest

from kame_data.recipe import SourceSpec, load_recipe
from kame_data.records import Reject, SourceItem
from kame_data.schema import validate
from kame_data.sources import filters as F
from kame_data.sources import load_items, load_source
from kame_data.sources.common import safe_id
from kame_data.sources.config import FilterConfig
from kame_data.sources.row_schemas import RowSchema, jsonl_schema
from kame_data.sources.rows import MAX_DEPTH, SourceError, read_rows
from tests.conftest import CLI, ROOT

FIELDS = {"question": "q.text", "answer": "a", "options": "choices", "id": "uid", "category": "topic"}
REAL_FILES = {"mmlu_pro": ["mmlu_pro_test_300.jsonl", "mmlu_pro_validation.jsonl"], "gsm8k": ["gsm8k_test_200.jsonl"],
              "hssbench": ["hssbench_own.jsonl"], "mt_bench": ["mt_bench_questions.jsonl"]}


def _write(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _rejects(out):
    return [(r.id, r.reason, r.detail) for r in out if isinstance(r, Reject)]


@pytest.mark.parametrize("kind", sorted(REAL_FILES))
def test_every_real_row_fits_its_schema(fixtures_dir, kind):
    shape = RowSchema(kind)
    names = REAL_FILES[kind] + [f"quickstart_{kind}.jsonl"] * (kind in ("mmlu_pro", "gsm8k", "hssbench"))
    for name in names:
        path = fixtures_dir / name if (fixtures_dir / name).exists() else ROOT / "recipes" / "data" / name
        rows = list(read_rows(path=path))
        assert rows and [shape.problem(row) for row in rows] == [None] * len(rows), name


def test_wrong_shapes_are_rejects_naming_file_line_and_field(tmp_path):
    good = {"question_id": 1, "question": "What is two plus two?", "options": ["three", "four"], "answer_index": 1}
    rows = [
        good,
        {**good, "question_id": 2, "options": 5},
        {**good, "question_id": 3, "question": {"a": 1}},
        {**good, "question_id": 4, "answer_index": True},  # a boolean is not option B
        {**good, "question_id": 5, "answer_index": 2},  # past the two options
        {**good, "question_id": 6, "options": ["x" * 1_000_000, 3]},
        {**good, "question_id": 7, "options": [f"option {k}" for k in range(40)]},  # more options than letters
        {**good, "question_id": 8, "answer_index": 1.0},
        {"question_id": 9, "options": ["a", "b"]},
    ]
    path = _write(tmp_path / "mmlu_pro_test.jsonl", rows)
    out = list(load_source(SourceSpec(kind="mmlu_pro", path=str(path), max_bad_rows=0)))  # not malformed lines
    assert [type(o).__name__ for o in out] == ["SourceItem"] + ["Reject"] * 8
    assert {(i, reason) for i, reason, _ in _rejects(out)} == {(f"mmlu_pro_test.jsonl:{n}", "invalid_row")
                                                              for n in range(2, 10)}
    details = [d.removeprefix(f"{path}:") for _, _, d in _rejects(out)]
    assert details == [
        "2: options: 5 is not of type 'array'",
        "3: question: {'a': 1} is not of type 'string'",
        "4: answer_index: True is not of type 'integer', 'null'",
        "5: answer_index: 2 is not an index of the 2 options",
        "6: options[1]: 3 is not of type 'string', 'null'",
        "7: options: 40 entries, more than 26",
        "8: answer_index: 1.0 is not of type 'integer', 'null'",
        "9: <row>: 'question' is a required property",
    ]


def test_each_kind_refuses_its_own_wrong_shapes(tmp_path):
    cases = {
        "gsm8k": [({"question": "Q?", "answer": 18}, "answer: 18 is not of type 'string'"),
                  ({"question": ["Q?"], "answer": "#### 1"}, "question: ['Q?'] is not of type 'string'")],
        "hssbench": [({"id": "h1", "question": "Q?", "options": {"A": "a", "B": {"x": 1}}, "correct_answer": "A"},
                      "options.B: {'x': 1} is not of type 'string', 'null'"),
                     ({"id": "h2", "question": "Q?", "options": {"A": "a", "BB": "b"}, "correct_answer": "A"},
                      "options: 'BB' does not match '^\\\\s*[A-Za-z]\\\\s*$'"),
                     ({"id": "h3", "question": "Q?", "options": "A or B", "correct_answer": "A"},
                      "options: 'A or B' is not of type 'object', 'array'"),
                     ({"id": "h4", "question": "Q?", "options": ["a", "b"], "correct_answer": 1},
                      "correct_answer: 1 is not of type 'string', 'null'")],
        "mt_bench": [({"question_id": 1, "turns": 5}, "turns: 5 is not of type 'array', 'string', 'null'"),
                     ({"question_id": 2, "turns": ["Q?", {"a": 1}]}, "turns[1]: {'a': 1} is not of type 'string', 'null'"),
                     ({"question_id": 3, "category": "x"}, "<row>: 'turns' is a required property")],
    }
    for kind, rows in cases.items():
        path = _write(tmp_path / f"{kind}.jsonl", [row for row, _ in rows])
        out = list(load_source(SourceSpec(kind=kind, path=str(path))))
        assert [(i, reason) for i, reason, _ in _rejects(out)] == [(f"{kind}.jsonl:{n}", "invalid_row")
                                                                 for n in range(1, len(rows) + 1)], kind
        assert [d for _, _, d in _rejects(out)] == [f"{path}:{n}: {why}" for n, (_, why) in enumerate(rows, 1)]


def test_jsonl_schema_follows_the_fields_mapping(tmp_path):
    schema = jsonl_schema(FIELDS)
    assert {"properties": {"q": {"properties": {"text": {"$ref": "source_row_jsonl.schema.json#/$defs/question"}},
                                 "type": ["object", "null"]}}} in schema["allOf"]
    rows = [
        {"uid": "ok", "q": {"text": "Which planet is red?"}, "choices": ["Venus", "Mars"], "a": 1},
        {"uid": "q-dict", "q": {"text": {"a": 1}}, "a": "x"},
        {"uid": "q-str", "q": "Which planet is red?", "a": "x"},  # `q.text` wants an object at `q`
        {"uid": "opts", "q": {"text": "Which?"}, "choices": {"A": [1, 2]}, "a": "A"},
        {"uid": ["not", "an", "id"], "q": {"text": "Which?"}, "a": "x"},
        {"uid": "bool", "q": {"text": "Which planet is red?"}, "choices": ["Venus", "Mars"], "a": True},
    ]
    path = _write(tmp_path / "custom.jsonl", rows)
    out = list(load_source(SourceSpec(kind="jsonl", name="trivia", path=str(path), fields=FIELDS)))
    assert isinstance(out[0], SourceItem) and out[0].answer == "Mars"
    assert [d.removeprefix(f"{path}:") for _, reason, d in _rejects(out) if reason == "invalid_row"] == [
        "2: q.text: {'a': 1} is not of type 'string'",
        "3: q: 'Which planet is red?' is not of type 'object', 'null'",
        "4: choices.A: [1, 2] is not of type 'string', 'number', 'boolean', 'null'",
        "5: uid: ['not', 'an', 'id'] is not of type 'string', 'integer', 'null'",
    ]
    # a boolean answer is text ("True"), never an index: with options it names none of them
    assert _rejects(out)[-1][:2] == ("trivia-bool", "malformed_answer")


def test_odd_json_lines_are_bad_rows_counted_by_max_bad_rows(tmp_path):
    good = {"question": "What is two plus two?", "answer": "2 + 2 = 4.\n#### 4"}
    lines = [json.dumps(good), "[" * 100_000 + "]" * 100_000,  # json.loads: RecursionError
             '{"question": "Q?", "answer": "#### 1", "meta": ' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}",
             '{"question": "Q\\ud800?", "answer": "#### 1"}', '{"question": "Q?", "answer": NaN}',
             '{"question": "Q?", "answer": 1' + "0" * 5000 + "}"]
    path = tmp_path / "g.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = list(load_source(SourceSpec(kind="gsm8k", path=str(path), max_bad_rows=5)))
    assert isinstance(out[0], SourceItem)
    assert [(i, reason) for i, reason, _ in _rejects(out)] == [
        ("g.jsonl:2", "too_deep"), ("g.jsonl:3", "too_deep"), ("g.jsonl:4", "invalid_unicode"),
        ("g.jsonl:5", "invalid_json"), ("g.jsonl:6", "invalid_json")]
    assert _rejects(out)[0][2] == f"{path}:2: nested more than {MAX_DEPTH} levels deep"
    assert [d.split(": ", 1)[1] for *_, d in _rejects(out)[3:]] == [
        "not valid JSON: NaN is not a JSON number", "not valid JSON: an integer of more than 4300 digits"]
    with pytest.raises(SourceError, match=r"5 malformed of 6 lines read, more than max_bad_rows \(4\); first: .*g.jsonl:2"):
        list(load_source(SourceSpec(kind="gsm8k", path=str(path), max_bad_rows=4)))
    whole = tmp_path / "deep.json"
    whole.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SourceError, match=r"deep.json: not readable: JSON nested deeper than Python's reader goes"):
        list(load_source(SourceSpec(kind="gsm8k", path=str(whole))))


def test_a_bug_on_one_row_is_a_transient_reject_and_reading_goes_on(tmp_path, fixtures_dir, monkeypatch, caplog):
    """A filter (the normaliser behind it) that fails on one question: that item's `internal_error`
    reject with the scrubbed message, its traceback in the log, every other row read."""
    import kame_data.sources.read as sources
    import kame_data.sources.step as step

    real_check, real_key = sources.check, step.dedup_key

    first, second = [row["question"].strip() for row in list(read_rows(path=fixtures_dir / "gsm8k_test_200.jsonl"))[:2]]

    def check(item, cfg, *rest):
        if item.question == first:
            raise ValueError("invalid literal for int() with base 10: 'sk-test-secret-1234567890'")
        return real_check(item, cfg, *rest)

    def dedup_key(item):
        if item.question == second:
            raise IndexError("list index out of range")
        return real_key(item)

    monkeypatch.setattr(sources, "check", check)
    monkeypatch.setattr(step, "dedup_key", dedup_key)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"name: one\nsources: [{{kind: gsm8k, path: {fixtures_dir / 'gsm8k_test_200.jsonl'}}}]\n")
    with caplog.at_level(logging.INFO, logger="kame_data"):
        items, rejects = load_items(load_recipe(recipe), FilterConfig())
    errors = [r for r in rejects if r.reason == "internal_error"]
    assert [(r.stage, r.transient) for r in errors] == [("sources", True), ("sources", True)]
    by_type = {r.detail.split(":")[0]: r for r in errors}
    assert by_type["ValueError"].detail == "ValueError: invalid literal for int() with base 10: '[redacted]'"
    assert by_type["IndexError"].detail == "IndexError: list index out of range"
    assert all(r.id.startswith("gsm8k-") for r in errors)
    assert len(items) + len(rejects) == 200 and Counter(r.reason for r in rejects) == {"internal_error": 2, "too_long": 1}
    # The traceback goes to the log (run.log), the console gets one warning line per item.
    logged = [rec for rec in caplog.records if rec.exc_info and "raised on" in rec.getMessage()]
    assert len(logged) == 2 and {rec.exc_info[0] for rec in logged} == {ValueError, IndexError}
    assert sum(rec.levelno == logging.WARNING and not rec.exc_info for rec in caplog.records
               if "internal_error" in rec.getMessage()) == 2


def _raw_ids(n: int = 1000) -> list:
    """Distinct raw ids that sanitising would collapse: separators, NUL, non-Latin scripts, 5,000
    characters, ids differing only in replaced characters, and ids that look already hashed."""
    rng = random.Random(23)
    special = ["a/b", "a_b", "a\x00b", "a b", "a\\b", "a.b", "a-b", "a__b", "a//b", "a/_b", "_a", "a_", ".a", "a.", "a",
               "é", "ü", "日本", "中文", "Ω", "🙂", "\x00", "/", "_", ".", " ", "ab" * 2500, "ab" * 2500 + "c",
               "x" * 64, "x" * 65, "x" * 5000, "問" * 5000, 7, "8", -1, "-1", 10**40]
    special += [safe_id("s", raw).removeprefix("s-") for raw in special]  # ids that look like hashed ones
    alphabet = "ab/_\x00 .-é日本\u200bΩ"
    ids = list(dict.fromkeys(str(s) for s in special))
    while len(ids) < n:
        size = rng.choice([1, 2, 3, 5, 8, 50, 70, 300, 5000])
        raw = "".join(rng.choice(alphabet) for _ in range(size))
        if raw not in ids:
            ids.append(raw)
    return ids[:n]


NATIVE_ID_ROWS = {
    "mmlu_pro": lambda k, raw: {"question_id": raw, "question": f"Which number comes after {k}?",
                                "options": [str(k), str(k + 1)], "answer_index": 1, "category": "math"},
    "hssbench": lambda k, raw: {"id": raw, "question": f"Which year came after the year {k}?",
                                "options": {"A": str(k + 1), "B": str(k + 2)}, "correct_answer": "A",
                                "category": "History"},
    "mt_bench": lambda k, raw: {"question_id": raw, "turns": [f"Which number comes after {k}?"],
                                "reference": [str(k + 1)], "category": "math"},
    "jsonl": lambda k, raw: {"uid": raw, "q": {"text": f"Which number comes after {k}?"}, "a": str(k + 1)},
}


@pytest.mark.parametrize("kind", sorted(NATIVE_ID_ROWS))
def test_a_thousand_distinct_raw_ids_give_a_thousand_items(tmp_path, kind):
    ids = _raw_ids()
    assert len(set(ids)) == 1000
    _write(tmp_path / "rows.jsonl", [NATIVE_ID_ROWS[kind](k, raw) for k, raw in enumerate(ids)])
    fields = "fields: {question: q.text, answer: a, id: uid}" if kind == "jsonl" else ""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(textwrap.dedent(f"""
        name: ids
        sources:
          - kind: {kind}
            path: rows.jsonl
            {fields}
    """))
    items, rejects = load_items(load_recipe(recipe), FilterConfig())
    assert Counter(r.reason for r in rejects) == Counter() and len(items) == 1000
    assert len({i.id for i in items}) == 1000
    for item in items:
        validate("source_item", item.to_dict())
        assert len(f"{item.id}-v99.wav".encode()) < 100
    assert [i.id for i in items][:3] == [safe_id(items[0].source, ids[k]) for k in range(3)]


def test_null_ids_are_missing_ids(tmp_path):
    """Parquet writes a missing id as null: the row's number stands in, never the id "None"."""
    rows = [{"question_id": None, "question": f"Which number comes after {k}?", "options": [str(k), str(k + 1)],
             "answer_index": 1} for k in range(2)]
    out = list(load_source(SourceSpec(kind="mmlu_pro", path=str(_write(tmp_path / "m.jsonl", rows)))))
    assert [o.id for o in out] == ["mmlu_pro-0", "mmlu_pro-1"]
    rows = [{"question_id": None, "prompt_id": 7, "turns": ["Which number comes after one?"]},
            {"question_id": None, "turns": ["Which number comes after two?"]}]
    out = list(load_source(SourceSpec(kind="mt_bench", path=str(_write(tmp_path / "t.jsonl", rows)))))
    assert [o.id for o in out] == ["mt_bench-7", "mt_bench-row1"]


def test_ids_that_need_no_change_stay_as_they_were():
    """Recorded row hashes (the quickstart's) depend on item ids."""
    assert safe_id("mmlu_pro", 70) == "mmlu_pro-70"
    assert safe_id("hssbench", "kq-geo-1") == "hssbench-kq-geo-1"
    assert safe_id("mt_bench", "x" * 64) == "mt_bench-" + "x" * 64
    assert safe_id("hssbench", "a/b") == "hssbench-_a_b_" + hashlib.sha256(b"a/b").hexdigest()[:12]
    assert safe_id("t", "日本").startswith("t-_") and len(safe_id("t", "x" * 5000)) == len("t-_") + 48 + 13


def test_a_huge_text_is_too_long_before_it_is_normalised():
    """Normalising costs more than linear time in the text: a megabyte question is told by its length."""
    item = SourceItem(id="t-1", source="t", category="c", question="What is -3/4 m/s² plus 2 kg? " * 40_000,
                      options=["1 kg", "x" * 10], answer="1 kg", answer_letter="A")
    start = time.perf_counter()
    flag = F.check(item, F.FilterConfig())
    assert time.perf_counter() - start < 5  # normalising it would take hours; a generous bound
    assert flag == ("too_long", f"question: {len(item.question)} characters, far more than 45 s can say")
    long_option = SourceItem(id="t-2", source="t", category="c", question="Which?", options=["a", "b" * 5000],
                             answer="a", answer_letter="A")
    assert F.check(long_option, F.FilterConfig()).detail == "option 2: 5000 characters, far more than 45 s can say"
    assert F.check(long_option, F.FilterConfig(skip=("too_long",))) is None


def test_a_file_of_another_kind_still_ends_with_one_line(tmp_path, fixtures_dir):
    """Wrong-shaped rows are rejects, not malformed lines (max_bad_rows 0 is not reached): a GSM8K file
    named as MMLU-Pro gives 200 `invalid_row` rejects and the run's one line, no items to process."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"name: wrong\nsources: [{{kind: mmlu_pro, path: {fixtures_dir / 'gsm8k_test_200.jsonl'}, "
                      f"max_bad_rows: 0}}]\n")
    out = tmp_path / "out"
    r = subprocess.run(CLI + ["run", str(recipe), "--out", str(out), "--until", "script", "-q"],
                       capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [f"error: no source items to process (200 rejected: invalid_row 200; see {out.resolve() / 'rejects.jsonl'})"]
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    assert {x["reason"] for x in rejects} == {"invalid_row"}
    assert rejects[0]["detail"].endswith("gsm8k_test_200.jsonl:1: <row>: 'options' is a required property")

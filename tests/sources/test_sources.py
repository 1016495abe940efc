"""Source adapters, filters and sampling on the fixture rows in tests/data/sources (see SOURCES.md there)."""

import json
import textwrap
from collections import Counter

import pytest

from kame_data.recipe import RecipeError, SourceSpec, load_recipe
from kame_data.runner.config import RunConfig
from kame_data.records import FollowUp, Reject, SourceItem
from kame_data.schema import validate
from kame_data.script.config import ScriptConfig
from kame_data.script.template import script_batch
from kame_data.sources import filters as F
from kame_data.sources import load_items, load_source
from kame_data.sources.rows import BadRow, SourceError, read_rows
from kame_data.sources.allocate import allocate as spread
from kame_data.sources.sampling import allocate, assign_variants, select

FILES = {
    "mmlu_pro": ["mmlu_pro_test_300.jsonl", "mmlu_pro_validation.jsonl"],
    "gsm8k": ["gsm8k_test_200.jsonl"],
    "hssbench": ["hssbench_own.jsonl"],
    "mt_bench": ["mt_bench_questions.jsonl"],
}

# Every fixture row through ingest (adapters + filters) and the template script: what is dropped, and why.
# Every user turn fits 45 s (filters.max_seconds, script.max_turn_seconds): the question with the
# answer and one other option, or the script reads fewer options, or the item is refused too_long.
# A user turn of over 100 spoken words is refused too (records.MAX_RUN_WORDS: the ladder would give
# the reply before its last word): 6 more MMLU-Pro test items, 3 validation, 3 GSM8K. (One of
# them, 11788, reaches 103 words once its run-together words are split: "oxygenis", "areabsent"; and
# 11617, a Laplace transform, passes its limit once "(s + 2)(s^2 + 4s + 29)" is read with its "times".)
EXPECTED_REASONS = {
    "mmlu_pro_test_300.jsonl": {"heavy_latex": 3, "heavy_math": 9, "needs_context": 1, "needs_image": 1, "too_long": 51},
    "mmlu_pro_validation.jsonl": {"code": 1, "heavy_math": 1, "too_long": 8},
    "gsm8k_test_200.jsonl": {"too_long": 4},
    "hssbench_own.jsonl": {"malformed_answer": 1, "needs_context": 4, "needs_image": 11, "not_english": 1, "too_long": 1},
    "mt_bench_questions.jsonl": {"code": 9, "not_english": 1, "table": 1, "too_long": 11, "no_reference_answer": 35},
}
EXPECTED_DIALOGUES = {"mmlu_pro_test_300.jsonl": 235, "mmlu_pro_validation.jsonl": 60, "gsm8k_test_200.jsonl": 196,
                      "hssbench_own.jsonl": 23, "mt_bench_questions.jsonl": 23}


def _load(fixtures_dir, kind, name, **spec):
    return list(load_source(SourceSpec(kind=kind, path=str(fixtures_dir / name), **spec)))


@pytest.mark.parametrize("kind,name", [(k, n) for k, names in FILES.items() for n in names])
def test_fixture_rows_ingest_and_script(fixtures_dir, kind, name):
    results = _load(fixtures_dir, kind, name)
    rows = sum(1 for _ in read_rows(path=fixtures_dir / name))
    assert len(results) == rows  # every row is an item or a reject: nothing silently dropped
    items = [r for r in results if isinstance(r, SourceItem)]
    for item in items:
        validate("source_item", item.to_dict())
    dialogues = script_batch(items, ScriptConfig(), seed=0)
    assert len(dialogues) == len(items)
    rejects = [r for r in results + dialogues if isinstance(r, Reject)]
    for r in rejects:
        validate("reject", r.to_dict())
        assert r.reason and r.detail
    for d in dialogues:
        if not isinstance(d, Reject):
            validate("dialogue", d.to_dict())
    assert dict(Counter(r.reason for r in rejects)) == EXPECTED_REASONS[name]
    assert sum(not isinstance(d, Reject) for d in dialogues) == EXPECTED_DIALOGUES[name]


def test_gsm8k_answers_lose_calculator_notes(fixtures_dir):
    items = [r for r in _load(fixtures_dir, "gsm8k", "gsm8k_test_200.jsonl") if isinstance(r, SourceItem)]
    assert len(items) == 199  # one question takes over 45 s to say (too_long)
    first = items[0]
    assert first.answer == "18"
    assert "<<" not in first.explanation and "####" not in first.explanation
    assert first.explanation == "Janet sells 16 - 3 - 4 = 9 duck eggs a day. She makes 9 * 2 = $18 every day at the farmer’s market."


def test_gsm8k_socratic_steps():
    from kame_data.sources.gsm8k import parse_row

    row = {"question": "Q?", "answer": "How many eggs are left? ** 16 - 3 = <<16-3=13>>13 eggs are left.\n#### 13"}
    item = parse_row(row, 0)
    assert item.explanation == "16 - 3 = 13 eggs are left." and item.answer == "13"


def test_mmlu_pro_cot_and_padding(fixtures_dir):
    items = {r.id: r for r in _load(fixtures_dir, "mmlu_pro", "mmlu_pro_validation.jsonl") if isinstance(r, SourceItem)}
    assert items["mmlu_pro-44"].explanation.startswith("In lap winding, effectively two resistors")
    assert not items["mmlu_pro-44"].explanation.endswith("(A).")
    from kame_data.sources.mmlu_pro import parse_row

    item = parse_row({"question_id": 1, "question": "Q?", "options": ["a", "N/A", "b", "c"], "answer": "C",
                      "answer_index": 2, "cot_content": "", "category": "x"}, 0)
    assert item.options == ["a", "b", "c"] and item.answer == "b" and item.answer_letter == "B"


# HSSBench-style questions (hssbench_own.jsonl, written for this project) that point at their
# (absent) picture, and questions that read as plain text.
HSS_NEEDS_IMAGE = {
    "The soldiers in the picture are raising a flag": "refers to 'in the picture'",
    "What message about the tariff debate does this cartoon give?": "refers to 'this cartoon'",
    "The graph below shows the market for wheat.": "refers to 'The graph below'",
    "Refer to Figure 2. Which area represents consumer surplus": "refers to 'Figure 2'",
    "What feeling does the dark palette of this painting": "refers to 'of this painting'",
    "What was the painter's reason for leaving the background unfinished?": "refers to 'the painter'",
    "Judging by the embroidery shown above": "refers to 'shown above'",
    "The following are postage stamps issued for a national holiday.": "refers to 'The following are postage stamps'",
    "Observe the contour lines around the village.": "refers to 'Observe'",
    "Which of the marked locations has the warmest January?": "options are only labels: A, B, C, D",
    "What does the posture of the man on the right suggest": "refers to 'man on the right'",
}
HSS_NEEDS_CONTEXT = {
    "Questions 4-6 refer to the following information.": "refers to 'Questions 4-6 refer to'",
    "Using the evidence from Document 3, why did the merchants": "refers to 'from Document 3'",
    "Which policy would lower unemployment fastest in Scenario 2?": "refers to 'in Scenario 2'",
    "Read the following passage about migration to cities.": "'the following passage' is not given",
}
HSS_OTHER_REJECTS = {
    "Quelle fête est célébrée le 14 juillet": ("not_english", "question: 5 function words of 'fr', 0 English ones"),
    "A mid-sized city has grown quickly over the last twenty years": ("too_long", "question: about 92 s spoken > 45 s"),
    "Which ocean is the largest by area?": ("malformed_answer", "correct_answer 'E'"),
}
HSS_KEPT = [
    "Which agreement of 1648 brought the Thirty Years' War to an end?",
    "The main purpose of the Meiji land tax reform in Japan was to (",  # a blank; option "hand farmland back ..."
    "Which of the following best describes opportunity cost?",  # "of the following": not missing context
    "Which Dutch artist completed The Night Watch in 1642?",
    "Which form of Japanese theatre is known for carved masks",
    "Which holiday do many families in Mexico mark by building home altars",
    "____ is the language family to which Finnish and Estonian belong.",
    "What mainly causes the summer monsoon rains in South Asia?",
    "Which sociologist warned that modern bureaucracy could become an iron cage",
]


def _hss_by_question(fixtures_dir):
    rows = [json.loads(line) for line in (fixtures_dir / "hssbench_own.jsonl").read_text("utf-8").splitlines()]
    results = _load(fixtures_dir, "hssbench", "hssbench_own.jsonl")
    assert len(rows) == len(results) == 41
    by_question = {" ".join(row["question"].split()): res for row, res in zip(rows, results)}

    def find(prefix):
        hits = [res for q, res in by_question.items() if q.startswith(prefix)]
        assert len(hits) == 1, prefix
        return hits[0]

    return results, find


def test_hssbench_image_questions_rejected(fixtures_dir):
    results, find = _hss_by_question(fixtures_dir)
    assert len(HSS_NEEDS_IMAGE) >= 10 and len(HSS_KEPT) >= 5
    for prefix, detail in HSS_NEEDS_IMAGE.items():
        res = find(prefix)
        assert isinstance(res, Reject) and res.reason == "needs_image", (prefix, res)
        assert res.detail == detail, (prefix, res.detail)
    assert sum(isinstance(r, Reject) and r.reason == "needs_image" for r in results) == len(HSS_NEEDS_IMAGE)
    for prefix in HSS_KEPT:
        assert isinstance(find(prefix), SourceItem), prefix


def test_hssbench_missing_context_rejected(fixtures_dir):
    results, find = _hss_by_question(fixtures_dir)
    for prefix, detail in HSS_NEEDS_CONTEXT.items():
        res = find(prefix)
        assert isinstance(res, Reject) and res.reason == "needs_context", (prefix, res)
        assert res.detail == detail, (prefix, res.detail)
    reasons = {r.detail for r in results if isinstance(r, Reject) and r.reason == "needs_context"}
    assert reasons == set(HSS_NEEDS_CONTEXT.values())


def test_hssbench_other_rejects_and_odd_answers_in_file(fixtures_dir):
    results, find = _hss_by_question(fixtures_dir)
    for prefix, (reason, detail) in HSS_OTHER_REJECTS.items():
        res = find(prefix)
        assert isinstance(res, Reject) and (res.reason, res.detail) == (reason, detail), (prefix, res)
    lower = find("Which agreement of 1648 brought the Thirty Years' War to an end?")  # correct_answer "b"
    assert lower.answer_letter == "B" and lower.answer == "The Peace of Westphalia"
    two = find("Which two of these are usually treated as public goods")  # "A,D"
    assert two.answer_letter == "A,D" and two.answer == "Street lighting and National defence"
    landlocked = find("Which of these countries have no coastline?")  # "C,D"
    assert landlocked.answer_letter == "C,D" and landlocked.answer == "Bolivia and Mongolia"
    three = find("____ is the language family")  # three options
    assert three.options == ["Uralic", "Germanic", "Slavic"] and three.answer_letter == "A"
    items = [r for r in results if isinstance(r, SourceItem)]
    assert Counter(i.category for i in items) == {"History": 4, "Economy": 4, "Art": 4, "Culture": 4,
                                                   "Geography": 4, "Social science": 3}
    assert all(i.license == "unknown" and i.meta["pic_path"] for i in items)


def test_hssbench_odd_answers_do_not_crash():
    rows = [
        {"id": "x1", "question": "Which are rivers?", "options": {"A": "Nile", "B": "Alps", "C": "Rhine", "D": "Gobi"},
         "correct_answer": "A,C", "category": "Geography"},
        {"id": "x2", "question": "Pick one", "options": {"A": "a", "B": "b"}, "correct_answer": "b", "category": "Art"},
        {"id": "x3", "question": "Pick one", "options": {"A": "a", "B": "b"}, "correct_answer": "Z", "category": "Art"},
        {"id": "x4", "question": "Pick", "options": {"A": "a", "B": "b", "C": "c"}, "correct_answer": "A、C"},
        {"id": "x5", "question": "Pick", "options": {"A": "a", "B": "b", "C": "c"}, "correct_answer": "CA"},
        {"id": "x6", "question": "Pick", "options": {"A": "a", "B": "b"}, "correct_answer": None},
        {"id": "x7", "question": "Pick", "options": {"A": "a", "C": "c"}, "correct_answer": "A"},
        {"id": "x8", "question": "Pick", "options": "A or B", "correct_answer": "A"},
    ]
    from kame_data.sources.hssbench import parse_row

    out = [parse_row(r, i) for i, r in enumerate(rows)]
    assert isinstance(out[0], SourceItem) and out[0].answer_letter == "A,C" and out[0].answer == "Nile and Rhine"
    assert isinstance(out[1], SourceItem) and out[1].answer_letter == "B"
    assert isinstance(out[2], Reject) and out[2].reason == "malformed_answer"
    assert out[3].answer_letter == "A,C" and out[4].answer_letter == "A,C"
    assert isinstance(out[5], Reject) and out[5].reason == "malformed_answer"
    assert isinstance(out[6], Reject) and out[6].reason == "malformed_options"
    assert isinstance(out[7], Reject) and out[7].reason == "malformed_options"


def test_mt_bench_two_turns_both_formats(fixtures_dir):
    items = {r.id: r for r in _load(fixtures_dir, "mt_bench", "mt_bench_questions.jsonl") if isinstance(r, SourceItem)}
    item = items["mt_bench-104"]
    assert item.category == "reasoning" and item.answer.startswith("David has no brother")
    assert item.followups == [FollowUp(question=item.followups[0].question, answer="David has one brother.")]
    assert items["mt_bench-141"].answer == "" and items["mt_bench-141"].followups[0].answer == ""
    from kame_data.sources.mt_bench import parse_row

    hub = parse_row({"prompt": ["First?", "Second?"], "prompt_id": 12345678, "category": "stem", "reference": []}, 0)
    assert hub.id == "mt_bench-12345678" and hub.question == "First?" and hub.followups == [FollowUp("Second?", "")]
    assert isinstance(parse_row({"prompt": [], "category": "x"}, 3), Reject)


def test_mt_bench_categories_selected(fixtures_dir):
    results = _load(fixtures_dir, "mt_bench", "mt_bench_questions.jsonl", categories=["Reasoning", "STEM", "humanities"])
    assert {r.category for r in results if isinstance(r, SourceItem)} == {"reasoning", "stem", "humanities"}
    assert len(results) == 30  # other categories are not read at all, so they are not rejects either


def test_jsonl_source_with_field_mapping(tmp_path):
    rows = [
        {"uid": "q1", "q": {"text": "Which planet is red?"}, "choices": ["Venus", "Mars"], "a": "B", "topic": "space"},
        {"uid": "q2", "q": {"text": "Which is a metal?"}, "choices": {"A": "Iron", "B": "Wood"}, "a": 0, "topic": "chem"},
        {"uid": "q3", "q": {"text": "Capital of France?"}, "choices": [], "a": "Paris", "topic": "geo"},
        {"uid": "q4", "q": {"text": "Odd?"}, "choices": ["x", "y"], "a": "zebra", "topic": "geo"},
        {"uid": "q5", "q": {"text": ""}, "a": "x"},
    ]
    p = tmp_path / "custom.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(textwrap.dedent("""
        name: custom
        sources:
          - kind: jsonl
            name: trivia
            path: custom.jsonl
            fields: {question: q.text, answer: a, category: topic, options: choices, id: uid}
    """))
    items, rejects = items_of(load_recipe(recipe))
    assert [i.id for i in items] == ["trivia-q1", "trivia-q2", "trivia-q3"]
    assert items[0].answer == "Mars" and items[0].answer_letter == "B" and items[0].source == "trivia"
    assert items[1].answer == "Iron" and items[2].answer == "Paris" and items[2].answer_letter == ""
    assert {r.id: r.reason for r in rejects} == {"trivia-q4": "malformed_answer", "jsonl-row4": "malformed_question"} or \
        {r.reason for r in rejects} == {"malformed_answer", "malformed_question"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsources: [{kind: jsonl, path: custom.jsonl}]\n")
    with pytest.raises(RecipeError, match="fields"):
        load_recipe(bad)


def items_of(recipe, limit=None):
    """A recipe's items as a run reads them: through its `filters` section, parsed by the run config."""
    return load_items(recipe, RunConfig.resolve(recipe).filters, limit)


def _recipe(tmp_path, fixtures_dir, body: str):
    p = tmp_path / "r.yaml"
    p.write_text(textwrap.dedent(body).replace("FIX", str(fixtures_dir)))
    return load_recipe(p)


def test_duplicates_across_sources(tmp_path, fixtures_dir):
    rows = [json.loads(l) for l in (fixtures_dir / "gsm8k_test_200.jsonl").read_text().splitlines()[:3]]
    copy = tmp_path / "copy.jsonl"
    copy.write_text("\n".join(json.dumps({"question": "  " + r["question"].upper() + " ", "answer": "1"}) for r in rows))
    r = _recipe(tmp_path, fixtures_dir, """
        name: dup
        sources:
          - {kind: gsm8k, path: FIX/gsm8k_test_200.jsonl, limit: 5}
          - {kind: jsonl, name: copy, path: copy.jsonl, fields: {question: question, answer: answer}}
          - {kind: gsm8k, path: FIX/gsm8k_test_200.jsonl, limit: 2}
    """)
    items, rejects = items_of(r)
    reasons = Counter(x.reason for x in rejects)
    assert reasons == {"duplicate": 3, "duplicate_id": 2}
    assert len(items) == 5
    assert all("same text as gsm8k-" in x.detail for x in rejects if x.reason == "duplicate")


def test_filters_configurable(tmp_path, fixtures_dir):
    strict = _recipe(tmp_path, fixtures_dir, """
        name: f
        sources: [{kind: mmlu_pro, path: FIX/mmlu_pro_validation.jsonl}]
        filters: {max_seconds: 20, skip: [code]}
    """)
    items, rejects = items_of(strict)
    reasons = Counter(r.reason for r in rejects)
    assert "code" not in reasons and reasons["too_long"] > 10
    assert len(items) + len(rejects) == 70


def test_filter_functions_are_pure_and_specific():
    cfg = F.FilterConfig()

    def item(q, options=(), answer="x"):
        return SourceItem(id="t-1", source="t", category="c", question=q, options=list(options), answer=answer,
                          answer_letter="A" if options else "")

    assert F.needs_image(item("What does the map below show?"), cfg).reason == "needs_image"
    assert F.needs_image(item("A certain map uses a scale of 1 inch to 25 miles. What is 5 inches on this map?"), cfg) is None
    assert F.needs_image(item("Let G be an undirected graph with 5 vertices. How many edges are in the graph?"), cfg) is None
    assert F.needs_image(item("An object is 20 cm from a converging lens. Where is the image?"), cfg) is None
    assert F.needs_image(item("A 2 kg block rests on the table. What is the normal force?"), cfg) is None
    assert F.needs_context(item("According to Document 2, what did Venice do?"), cfg).reason == "needs_context"
    assert F.table(item("Year | Sales\n2019 | 10\n2020 | 12"), cfg).reason == "table"
    assert F.code(item("What does this print?\nx = 5;\nprint(x == 5)"), cfg).reason == "code"
    assert F.code(item("The null hypothesis is rejected at 5%."), cfg) is None
    assert F.heavy_latex(item(r"Evaluate $\int_0^1 x\,dx$."), cfg).reason == "heavy_latex"
    assert F.heavy_latex(item(r"What is $\frac{1}{2} + \frac{1}{4}$?"), cfg) is None
    assert F.heavy_math(item("Which is right?", ["(∀x)(Px ⊃ Qx)", "(∃x)(Px • Qx)", "(∀x)(Px ∨ Qx)", "∃x ¬Px", "(∀x)(Px ≡ Qx)"]),
                        cfg).reason == "heavy_math"
    assert F.not_english(item("¿Cuál es la capital de Francia y por qué es la más grande del país?"),
                         cfg).reason == "not_english"
    assert F.not_english(item("What does the character 水 mean?"), cfg).reason == "not_english"
    assert F.not_english(item("What is the value of α in the formula?"), cfg) is None
    assert F.too_long(item("word " * 300), cfg).reason == "too_long"
    assert F.malformed_answer(item("Q?", answer="..."), cfg).reason == "malformed_answer"
    assert F.check(item("What is two plus two?"), cfg) is None
    assert F.check(item("What does the map below show?"), F.FilterConfig(skip=("needs_image",))) is None


def test_stratified_sampling_is_deterministic_and_proportional(tmp_path, fixtures_dir):
    body = """
        name: s
        seed: SEED
        sources: [{kind: mmlu_pro, path: FIX/mmlu_pro_test_300.jsonl, quota: 70, dialogues: 150}]
    """
    a, _ = items_of(_recipe(tmp_path, fixtures_dir, body.replace("SEED", "7")))
    b, _ = items_of(_recipe(tmp_path, fixtures_dir, body.replace("SEED", "7")))
    c, _ = items_of(_recipe(tmp_path, fixtures_dir, body.replace("SEED", "8")))
    assert [i.id for i in a] == [i.id for i in b] and [i.id for i in a] != [i.id for i in c]
    assert len(a) == 70 and sum(i.variants for i in a) == 150 and {i.variants for i in a} == {2, 3}
    available = Counter(r.category for r in _load(fixtures_dir, "mmlu_pro", "mmlu_pro_test_300.jsonl")
                        if isinstance(r, SourceItem))
    per_cat = Counter(i.category for i in a)
    for cat, n in available.items():  # each category in proportion to what passed the filters
        assert abs(per_cat[cat] - 70 * n / sum(available.values())) < 1


def test_per_category_quotas(tmp_path, fixtures_dir):
    r = _recipe(tmp_path, fixtures_dir, """
        name: s
        sources:
          - {kind: mt_bench, path: FIX/mt_bench_questions.jsonl, per_category: {reasoning: 3, STEM: 2}, variants: 2}
          - {kind: mmlu_pro, path: FIX/mmlu_pro_validation.jsonl, per_category: 1}
    """)
    items, _ = items_of(r)
    assert Counter(i.category for i in items if i.source == "mt_bench") == {"reasoning": 3, "stem": 2}
    assert all(i.variants == 2 for i in items if i.source == "mt_bench")
    mmlu = Counter(i.category for i in items if i.source == "mmlu_pro")
    assert len(mmlu) == 14 and set(mmlu.values()) == {1}


def test_sampling_helpers():
    assert allocate({"a": 10, "b": 30}, 8) == {"a": 2, "b": 6}
    assert allocate({"a": 1, "b": 1, "c": 1}, 2) == {"a": 1, "b": 1, "c": 0}
    assert allocate({"a": 3}, 10) == {"a": 3}
    items = [SourceItem(id=f"t-{i}", source="t", category="c", question="q", options=[], answer="a",
                        answer_letter="") for i in range(10)]
    assert [i.id for i in select(items, 0, "t", quota=4)] == [i.id for i in select(list(reversed(items)), 0, "t", quota=4)][::-1]
    assert {i.variants for i in assign_variants(items, 0, "t", variants=3)} == {3}
    exact, _ = spread(items, 0, "t", dialogues=17, max_variants=4)
    assert sum(i.variants for i in exact) == 17 and {i.variants for i in exact} == {1, 2}
    # fill: ratio, half the items: half the dialogues; fill: count, the count all the same
    scaled, alloc = spread(items[:5], 0, "t", dialogues=19, max_variants=4, planned_items=10, fill="ratio")
    assert sum(i.variants for i in scaled) == 10 and alloc.shortfall == 9 and alloc.reasons() == {"fewer_items": 9}
    met, _ = spread(items[:5], 0, "t", dialogues=19, max_variants=4, planned_items=10)
    assert sum(i.variants for i in met) == 19
    few, _ = spread(items, 0, "t", dialogues=3, max_variants=4)  # fewer dialogues than items: the count
    assert sum(i.variants for i in few) == 3 and len(few) == 3


def test_limit_interleaves_sources(tmp_path, fixtures_dir):
    r = _recipe(tmp_path, fixtures_dir, """
        name: l
        sources:
          - {kind: gsm8k, path: FIX/gsm8k_test_200.jsonl}
          - {kind: mmlu_pro, path: FIX/mmlu_pro_validation.jsonl}
    """)
    items, _ = items_of(r, limit=4)
    assert [i.source for i in items] == ["gsm8k", "mmlu_pro", "gsm8k", "mmlu_pro"]


def test_bad_jsonl_names_file_and_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"question": "ok", "answer": "#### 1"}\n{not json}\n')
    good, bad = list(read_rows(path=p))
    assert good == {"question": "ok", "answer": "#### 1"}
    assert isinstance(bad, BadRow) and bad.where == "bad.jsonl:2" and bad.reason == "invalid_json"
    with pytest.raises(SourceError, match=r"not_found.jsonl"):
        list(read_rows(path=tmp_path / "not_found.jsonl"))


def test_parquet_and_json_sources(tmp_path, fixtures_dir):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(l) for l in (fixtures_dir / "gsm8k_test_200.jsonl").read_text().splitlines()[:5]]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "g.parquet")
    (tmp_path / "g.json").write_text(json.dumps(rows))
    a = list(load_source(SourceSpec(kind="gsm8k", path=str(tmp_path / "g.parquet"))))
    b = list(load_source(SourceSpec(kind="gsm8k", path=str(tmp_path / "g.json"))))
    assert [x.id for x in a] == [x.id for x in b] and len(a) == 5


def test_mt_bench_parquet_lists(tmp_path, fixtures_dir):
    """Hub rows come back from parquet with list columns; the adapter takes any sequence."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(l) for l in (fixtures_dir / "mt_bench_questions.jsonl").read_text().splitlines()]
    rows = [{"prompt": r["turns"], "prompt_id": r["question_id"], "category": r["category"],
             "reference": r.get("reference", [])} for r in rows]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "mt.parquet")
    items = [r for r in load_source(SourceSpec(kind="mt_bench", path=str(tmp_path / "mt.parquet")))
             if isinstance(r, SourceItem)]
    assert len(items) == 58 and all(len(i.followups) == 1 for i in items)  # as the JSONL file: 80 less 22 rejects


def test_hub_loading_uses_datasets(tmp_path, fixtures_dir, monkeypatch):
    """The hub path goes through datasets.load_dataset; here a local dataset folder stands in for the hub."""
    import shutil

    repo = tmp_path / "openai_gsm8k"
    (repo / "main").mkdir(parents=True)
    shutil.copy(fixtures_dir / "gsm8k_test_200.jsonl", repo / "main" / "test.jsonl")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    items = list(load_source(SourceSpec(kind="gsm8k", hub=str(repo), split="test", limit=3)))
    assert len(items) == 3 and all(isinstance(i, SourceItem) for i in items)


def test_source_item_round_trips_through_json():
    item = SourceItem(id="mt_bench-1", source="mt_bench", category="stem", question="Q?", options=[], answer="",
                      answer_letter="", followups=[FollowUp("Then?", "Yes.")], variants=2)
    d = json.loads(json.dumps(item.to_dict()))
    validate("source_item", d)
    assert SourceItem(**d) == item

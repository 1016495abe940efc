"""Rows of every source kind drawn from hypothesis strategies (option lists
of 0-40 entries, wrong types everywhere, deep nesting, signed fractions with units, huge strings,
NUL and control characters, non-Latin text) through the real `kame-data run --until script`: the
run ends with exit 0, and every row written is a dialogue or a reject with a reason code.

Hypothesis only draws the rows here (a fixed seed, no shrinking): one CLI run then reads them all,
which is what a user's file of hostile rows meets. A row's one outcome at the sources stage is a
reject (`file:line` or its item id) or an item, and every item has dialogues or script rejects, so
the rows written equal the sources rejects plus the items the script stage saw.
"""

import json
import os
import re
import subprocess
from collections import Counter

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kame_data.records import LETTERS
from tests.conftest import CLI

ROWS_PER_KIND = 100
JSONL_FIELDS = {"question": "q.text", "answer": "a", "options": "choices", "id": "uid", "category": "topic",
                "explanation": "why"}


class Deep:
    """A value nested `depth` lists deep, written as raw text (json.dumps itself would recurse)."""

    def __init__(self, depth: int):
        self.depth = depth


def weighted(*pairs):
    """One of the strategies, drawn in proportion to their weights."""
    return st.sampled_from([s for s, w in pairs for _ in range(w)]).flatmap(lambda s: s)


SIGNS = st.sampled_from(["", "-", "+", "−", "±", "+-", "--", "- "])
NUMBERS = st.one_of(
    st.integers(-10**6, 10**12).map(str),
    st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str),
    st.sampled_from(["1,234", "3.", ".5", "1e5", "0x1F", "١٢٣", "½", "1½", "¾", "⅓", "10^3", "2²", "0/0", "1/0",
                     "1,000,000.5", "12:30", "3-4", "1.2.3", "007", "∞"]))
FRACTIONS = st.one_of(
    st.builds(lambda s, a, b: f"{s}{a}/{b}", SIGNS, st.integers(0, 999), st.integers(0, 999)),
    st.builds(lambda s, w, f: f"{s}{w}{f}", SIGNS, st.sampled_from(["", "1", "12", "1 "]), st.sampled_from("½⅓¼¾⅔⅛⅞")))
UNITS = st.sampled_from(["", " m/s²", " kg", " °C", "°F", " %", " km/h", " N·m", " Ω", " mol/L", " $", "€", " ft²",
                         " m³", " µm", " kWh", " /s", " g/cm³", " ‰", "m/s^2", " kg⋅m²", " Å", " dB", " h⁻¹"])
QUANTITY = st.one_of(
    st.builds(lambda s, n, u: f"{s}{n}{u}", SIGNS, st.one_of(NUMBERS, FRACTIONS), UNITS),
    st.builds(lambda u, s, n: f"{u.strip()}{s}{n}", UNITS, SIGNS, NUMBERS),
    st.sampled_from(["-3/4 m/s²", "+1½ kg", "−2/3 °C", "$-1,234.50", "€3,5", "-0.5%", "−⅔ m", "+-7/8 in", "-1/-2 kg"]))
LATEX = st.sampled_from([r"$\frac{-3}{4}$", r"$x^2$", r"\sqrt{2}", r"$\int_0^1 x\,dx$", "$", r"\frac{", "{}", "\\",
                         r"$\mathrm{m/s^{2}}$", r"$-\frac{1}{2}\,\text{kg}$"])
ODD = st.one_of(
    st.text(max_size=30),  # any code point but surrogates: NUL, controls, every script
    st.sampled_from(["\x00", "a\x00b", "\x07\x1b[31m", "日本語の質問ですか", "Что это такое?", "مرحبا بالعالم", "🙂🙂",
                     "\u200b", "\ufeff", "a\u0301", "\r\n\t", "\U0001d400", "\u202etxet"]))
HUGE = st.integers(3_000, 120_000).map(lambda n: ("What is -3/4 m/s² plus +1½ kg of " * (n // 30 + 1))[:n])
WORDS = st.sampled_from(["apples", "the train", "what", "is", "of", "how many", "left", "costs", "per day", "and"])
FRAGMENT = weighted((QUANTITY, 4), (LATEX, 1), (ODD, 1), (WORDS, 3))
TEXT = weighted(
    (st.builds(lambda a, b: f"What is {a} plus {b}?", QUANTITY, QUANTITY), 5),
    (st.builds(lambda parts: "How many " + " ".join(parts) + "?", st.lists(FRAGMENT, max_size=8)), 4),
    (st.builds(lambda a, b: f"A car moves at {a} for {b}. How far does it go?", QUANTITY, QUANTITY), 3),
    (ODD, 2), (LATEX, 1), (HUGE, 1))
OPTION = weighted((QUANTITY, 5), (WORDS, 2), (LATEX, 1), (ODD, 1), (st.sampled_from(["", "N/A", " "]), 1))
WRONG = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 50), st.floats(), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2), st.just({"a": 1}),
    st.integers(2, 3000).map(Deep), st.text(max_size=5))
NATIVE_ID = st.one_of(st.integers(0, 10**9), st.text(min_size=1, max_size=12),
                      st.integers(60, 5000).map(lambda n: "/é\x00" * n))
CATEGORY = st.sampled_from(["math", "physics", "History", "Geography", "Économie", ""])


def maybe_wrong(good, wrong_weight: int = 1):
    return weighted((good, 8), (WRONG, wrong_weight))


def sizes():
    return weighted((st.integers(2, 10), 5), (st.integers(0, 40), 2))


def mmlu_pro(options):
    index = weighted((st.integers(0, max(len(options) - 1, 0)), 6), (st.integers(-3, 45), 1), (st.booleans(), 1),
                     (WRONG, 1))
    return st.fixed_dictionaries(
        {"question": maybe_wrong(TEXT), "options": maybe_wrong(st.just(options)), "answer_index": index},
        optional={"question_id": maybe_wrong(NATIVE_ID), "answer": maybe_wrong(st.sampled_from(LETTERS[:12])),
                  "category": maybe_wrong(CATEGORY), "cot_content": maybe_wrong(TEXT), "extra": WRONG})


GSM8K = st.fixed_dictionaries(
    {"question": maybe_wrong(TEXT),
     "answer": maybe_wrong(st.builds(lambda steps, final: "\n".join(steps) + f"\n#### {final}",
                                     st.lists(st.builds(lambda a, b: f"She has {a} and <<1+1=2>>{b} left", QUANTITY,
                                                        QUANTITY), max_size=4),
                                     st.one_of(QUANTITY, NUMBERS, ODD)))},
    optional={"extra": WRONG})

HSS_OPTIONS = weighted(
    (st.lists(OPTION, min_size=2, max_size=6).map(lambda opts: dict(zip(LETTERS, opts))), 6),
    (sizes().flatmap(lambda n: st.lists(OPTION, min_size=n, max_size=n)), 2),
    (st.dictionaries(st.text(max_size=3), OPTION, max_size=4), 1), (WRONG, 1))
HSSBENCH = st.fixed_dictionaries(
    {"question": maybe_wrong(TEXT), "options": HSS_OPTIONS,
     "correct_answer": weighted((st.sampled_from("ABCDEF"), 5),
                                (st.sampled_from(["A,C", "b", "AD", "A、D", "Z", "", "A and B"]), 2), (WRONG, 1))},
    optional={"id": maybe_wrong(NATIVE_ID), "category": maybe_wrong(CATEGORY), "pic_path": maybe_wrong(st.just("")),
              "extra": WRONG})


def mt_bench(hub_names: bool):
    turns = weighted((st.lists(TEXT, min_size=1, max_size=3), 6), (st.lists(maybe_wrong(TEXT), max_size=8), 1),
                     (TEXT, 1), (WRONG, 1))
    return st.fixed_dictionaries(
        {"prompt" if hub_names else "turns": turns},
        optional={"prompt_id" if hub_names else "question_id": maybe_wrong(NATIVE_ID),
                  "reference": weighted((st.lists(maybe_wrong(QUANTITY), max_size=3), 4), (QUANTITY, 1), (WRONG, 1)),
                  "category": maybe_wrong(CATEGORY), "extra": WRONG})


def jsonl(options):
    answer = weighted((st.sampled_from(LETTERS[: max(len(options), 1)]), 3),
                      (st.integers(-2, max(len(options), 1) + 2), 2), (st.sampled_from(options or [""]), 2),
                      (st.booleans(), 1), (QUANTITY, 2), (WRONG, 1))
    return st.fixed_dictionaries(
        {"q": weighted((st.fixed_dictionaries({"text": maybe_wrong(TEXT)}), 8), (WRONG, 1)), "a": answer},
        optional={"uid": maybe_wrong(NATIVE_ID), "topic": maybe_wrong(CATEGORY), "why": maybe_wrong(TEXT),
                  "choices": weighted((st.just(options), 6), (st.just(dict(zip(LETTERS, options))), 2), (WRONG, 1))})


KINDS = {
    "mmlu_pro": sizes().flatmap(lambda n: st.lists(OPTION, min_size=n, max_size=n)).flatmap(mmlu_pro),
    "gsm8k": GSM8K,
    "hssbench": HSSBENCH,
    "mt_bench": st.booleans().flatmap(mt_bench),
    "jsonl": sizes().flatmap(lambda n: st.lists(OPTION, min_size=n, max_size=n)).flatmap(jsonl),
}
# Lines every file also gets: JSON nested far too deep for Python's parser, half a surrogate pair,
# a line cut short, a JSON list.
FIXED_LINES = ["[" * 5000 + "]" * 5000, '{"question": "What is \\ud800?"}', '{"question": "What is', "[1, 2]"]


def draw(strategy, n: int) -> list:
    """`n` examples of `strategy`, the same ones on every run (derandomized, no database)."""
    rows: list = []

    @settings(max_examples=n, derandomize=True, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(row):
        rows.append(row)

    collect()
    return rows


def to_line(row: dict, ascii_only: bool) -> bytes:
    """A row as one JSONL line; Deep values are spliced in as raw text; NaN and Infinity are written
    as Python's json writes them (not JSON: the reader refuses them)."""
    deep: list[Deep] = []

    def placeholder(value):
        deep.append(value)
        return f"@@deep{len(deep) - 1}@@"

    text = json.dumps(row, ensure_ascii=ascii_only, default=placeholder)
    for k, value in enumerate(deep):
        text = text.replace(f'"@@deep{k}@@"', "[" * value.depth + "]" * value.depth)
    return text.encode("utf-8", "surrogatepass")


def numbered(kind: str, row: dict, n: int) -> dict:
    """`row` with its question (where it is text) prefixed by `Case n:`. Hypothesis draws many rows
    alike; rows that differ reach the script stage instead of ending as duplicates."""
    holder, key = {"jsonl": (row.get("q"), "text"),
                   "mt_bench": (row.get("turns", row.get("prompt")), 0)}.get(kind, (row, "question"))
    if isinstance(holder, (dict, list)) and (key in holder if isinstance(holder, dict) else holder and key == 0):
        if isinstance(holder[key], str):
            holder[key] = f"Case {n}: {holder[key]}"
    return row


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A recipe naming one file per source kind, each of drawn rows and FIXED_LINES; and the number
    of rows written per file."""
    folder = tmp_path_factory.mktemp("hostile")
    sources, written = [], {}
    for kind, strategy in KINDS.items():
        rows = [numbered(kind, row, n) for n, row in enumerate(draw(strategy, ROWS_PER_KIND))]
        lines = [to_line(row, ascii_only=(n % 2 == 0)) for n, row in enumerate(rows)]
        lines += [line.encode() for line in FIXED_LINES]
        path = folder / f"fuzz_{kind}.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        written[path.name] = len(lines)
        spec = {"kind": kind, "path": path.name, "max_bad_rows": 100_000}  # this test counts them, not stops
        if kind == "jsonl":
            spec |= {"name": "fuzz", "fields": JSONL_FIELDS}
        sources.append(spec)
    recipe = folder / "fuzz.yaml"
    recipe.write_text(yaml.safe_dump({"name": "fuzz", "seed": 23, "sources": sources}))
    return recipe, written


def _run(recipe, out, until: str):
    r = subprocess.run(CLI + ["run", str(recipe), "--until", until, "--out", str(out), "-q"],
                       capture_output=True, text=True, timeout=900, env=os.environ.copy())
    assert r.returncode == 0, r.stderr[-3000:]
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text("utf-8").splitlines()]
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", x["reason"]) and x["detail"] for x in rejects)
    return rejects


def _rows_rejected_at_sources(rejects, written) -> list:
    at_sources = [x for x in rejects if x["stage"] == "sources"]
    per_file = Counter(x["id"].rsplit(":", 1)[0] for x in at_sources if x["id"].rsplit(":", 1)[0] in written)
    assert all(per_file[name] <= count for name, count in written.items())
    return at_sources


def _report(rejects, dialogues: int, written) -> None:
    reasons = Counter(x["reason"] for x in rejects)
    print(f"{sum(written.values())} rows: {dialogues} dialogues/items, {dict(reasons)}")
    for x in rejects:  # our own bugs on a row (tracebacks in the run's log): rejects, not crashes
        if x["reason"] == "internal_error":
            print("internal_error:", x["stage"], x["id"], x["detail"][:200])


@pytest.mark.slow
def test_hostile_rows_of_every_kind_through_the_sources_stage(hostile, tmp_path):
    """Every row is an item (OUT/items.jsonl) or a sources reject with a reason."""
    recipe, written = hostile
    out = tmp_path / "out"
    rejects = _run(recipe, out, "sources")
    items = [json.loads(line) for line in (out / "items.jsonl").read_text("utf-8").splitlines()]
    at_sources = _rows_rejected_at_sources(rejects, written)
    assert len(at_sources) + len(items) == sum(written.values())  # each row: one reject or one item
    assert len({i["id"] for i in items}) == len(items)
    assert {i["source"] for i in items} == {"mmlu_pro", "gsm8k", "hssbench", "mt_bench", "fuzz"}
    reasons = Counter(x["reason"] for x in rejects)
    assert reasons["invalid_row"] > 50 and reasons["too_deep"] >= 5 and reasons["invalid_unicode"] >= 5
    _report(rejects, len(items), written)


@pytest.mark.slow
def test_hostile_rows_of_every_kind_run_to_the_script_stage(hostile, tmp_path):
    """Exit 0, and every row a dialogue (OUT/scripts.jsonl, by item id) or
    a reject with a reason: the rows written equal the sources rejects plus the items the script
    stage saw (each has dialogues or script rejects)."""
    recipe, written = hostile
    out = tmp_path / "out"
    rejects = _run(recipe, out, "script")
    dialogues = [json.loads(line) for line in (out / "scripts.jsonl").read_text("utf-8").splitlines()]
    at_sources = _rows_rejected_at_sources(rejects, written)
    scripted = {d["item_id"] for d in dialogues} | {re.sub(r"-v\d+$", "", x["id"]) for x in rejects
                                                    if x["stage"] == "script"}
    assert len(at_sources) + len(scripted) == sum(written.values())
    assert {d["source"] for d in dialogues} == {"mmlu_pro", "gsm8k", "hssbench", "mt_bench", "fuzz"}
    _report(rejects, len(dialogues), written)

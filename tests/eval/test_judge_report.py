"""`kame-data eval judge` and `eval report` over a real loopback judge server (HTTP, the openai SDK):
FastChat's file formats, the rating parser's reasons, a refusing judge, the cache, the report."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kame_data.eval.answers import AnswerFileError, answer_record, read_answers, write_answers
from kame_data.eval.judge import (
    JUDGE_ERROR,
    NO_RATING,
    OUT_OF_RANGE,
    PROMPTS,
    SEVERAL,
    SINGLE_BRACKET,
    load_references,
    parse_rating,
    prompt_for,
    rating_flags,
    shipped_references,
    strict_rating,
)
from kame_data.eval.questions import PAPER_CATEGORIES, QuestionError, load_questions, shipped_questions
from kame_data.eval.report import ReportError, collect
from tests.loopback_server import LoopbackServer, refusal

# FastChat's model_answer fields (fastchat/llm_judge/gen_model_answer.py writes these).
FASTCHAT_ANSWER_KEYS = {"question_id", "answer_id", "model_id", "choices", "tstamp"}
FASTCHAT_JUDGMENT_KEYS = {"question_id", "model", "judge", "user_prompt", "judgment", "score", "turn", "tstamp"}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kame_data.cli.main", "eval", *args], capture_output=True,
                          text=True, timeout=300)


def test_the_shipped_questions_are_the_papers_thirty_with_two_turns_each():
    qs = load_questions(shipped_questions())
    assert len(qs) == 30 and {q.category for q in qs} == set(PAPER_CATEGORIES)
    assert all(len(q.turns) == 2 for q in qs)
    assert all(len(q.reference) == 2 for q in qs if q.category == "reasoning")
    assert len(load_questions(shipped_questions(), None)) == 80


@pytest.mark.parametrize("line, says", [
    ('{"question_id": "7", "category": "stem", "turns": ["a"]}', "question_id must be an integer"),
    ('{"question_id": 7, "category": "stem", "turns": []}', "turns must be"),
    ('{"question_id": 7, "category": "stem", "turns": ["a"], "reference": "x"}', "reference must be"),
    ('[1, 2]', "expected a JSON object"),
    ('{"question_id": 7, "category": "stem", "turns": ["a"]}\n{"question_id": 7, "category": "stem", "turns": ["b"]}',
     "appears twice"),
    ("{nope", "not JSON"),
])
def test_a_bad_question_file_names_its_line(tmp_path, line, says):
    path = tmp_path / "q.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(QuestionError, match=says):
        load_questions(path, None)


# FastChat's reading (fastchat/llm_judge/common.py, run_judge_single): re.search for [[N]] with
# r"\[\[(\d+\.?\d*)\]\]", else [N] with r"\[(\d+\.?\d*)\]", then ast.literal_eval of the group; -1 with
# neither. The expected scores below are what those two lines give, worked out by hand.
@pytest.mark.parametrize("text, score, flags", [
    ("Good answer. Rating: [[8]]", 8, []),
    ("Rating: [[7.5]]", 7.5, []),
    ("Rating: [[7.]]", 7.0, []),  # literal_eval("7.") is the float 7.0
    ("[[6]] ... to repeat, [[6]]", 6, []),
    ("Either [[3]] or [[9]]", 3, [SEVERAL]),  # the first
    ("Rating: [8]", 8, [SINGLE_BRACKET]),  # the backup pattern
    ("[8] first, then Rating: [[5]]", 5, []),  # [[N]] is looked for first, anywhere
    ("Rating: [[11]]", 11, [OUT_OF_RANGE]),  # kept
    ("Rating: [[0]]", 0, [OUT_OF_RANGE]),
    ("Rating: [[ 7 ]]", -1, [NO_RATING]),  # no spaces in either pattern
    ("Rating: [[-3]]", -1, [NO_RATING]),  # no sign either
    ("I would give it an 8.", -1, [NO_RATING]),
    ("", -1, [NO_RATING]),
    ("$ERROR$", -1, [JUDGE_ERROR]),
])
def test_ratings_are_read_as_fastchat_reads_them(text, score, flags):
    got = parse_rating(text)
    assert got == score and type(got) is type(score)
    assert rating_flags(text) == flags
    assert strict_rating(text) == (score if not flags else -1)


def _fastchat_reading(judgment: str):
    """FastChat's two lines, written out plainly."""
    import ast

    match = re.search(r"\[\[(\d+\.?\d*)\]\]", judgment) or re.search(r"\[(\d+\.?\d*)\]", judgment)
    return ast.literal_eval(match.groups()[0]) if match else -1


@given(st.text(alphabet=st.sampled_from("[]0123456789. -Rating:x"), max_size=40) | st.text(max_size=80))
def test_any_judgment_scores_as_fastchat_and_strict_only_refuses(text):
    assert parse_rating(text) == _fastchat_reading(text)
    assert strict_rating(text) in (-1, parse_rating(text))
    assert (strict_rating(text) == -1) == bool(rating_flags(text)) or parse_rating(text) == -1


def test_the_second_turn_is_judged_with_both_turns_and_references_where_the_category_has_them():
    qs = {q.category: q for q in load_questions(shipped_questions())}
    p, text = prompt_for(qs["reasoning"], 2, ["first answer", "second answer"], PROMPTS)
    assert p.name == "single-math-v1-multi-turn"
    for part in (*qs["reasoning"].turns, *qs["reasoning"].reference, "first answer", "second answer"):
        assert part in text
    p, text = prompt_for(qs["stem"], 1, ["an answer"], PROMPTS)
    assert p.name == "single-v1" and qs["stem"].turns[0] in text and "Reference" not in text


def test_answer_files_are_fastchats_format_and_bad_ones_are_named(tmp_path):
    rows = [answer_record(q, "m", ["a", "b"]) for q in (102, 101)]
    path = write_answers(tmp_path / "a.jsonl", rows)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["question_id"] for r in lines] == [101, 102]
    assert all(set(r) == FASTCHAT_ANSWER_KEYS and r["choices"][0]["index"] == 0 for r in lines)
    assert answer_record(101, "m", ["a", "b"])["answer_id"] == lines[0]["answer_id"]  # stable across reruns
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question_id": 1, "model_id": "m"}\n')
    with pytest.raises(AnswerFileError, match=r"bad.jsonl:1: missing answer_id, choices, tstamp"):
        read_answers(bad)


def _judge_reply(messages, asked):
    """A judge that rates by the answer's length, except for chosen questions (its prompt says which)."""
    text = messages[-1]["content"]
    if "SAYS-NO-RATING" in text:
        return "I cannot decide."
    if "SAYS-TWO" in text:
        return "Maybe [[2]], maybe [[9]]."
    if "SAYS-ELEVEN" in text:
        return "Rating: [[11]]"
    return f"Fine. Rating: [[{3 + len(text) % 5}]]"


def _refuse(body, seen, headers):
    return refusal("content filter") if "REFUSE-ME" in json.dumps(body) else None


def test_judge_and_report_over_a_loopback_judge(tmp_path):
    qs = load_questions(shipped_questions())
    special = {qs[0].question_id: "SAYS-NO-RATING", qs[1].question_id: "SAYS-TWO", qs[2].question_id: "SAYS-ELEVEN",
               qs[3].question_id: "REFUSE-ME"}
    front = write_answers(tmp_path / "answers-none.jsonl", [
        answer_record(q.question_id, "tiny-none", [f"{special.get(q.question_id, 'answer')} one",
                                                   "" if q.question_id == qs[4].question_id else "answer two"],
                      extra={"oracle_source": "none", "turns": [{"latency": 0.4, "took_turn": True},
                                                          {"latency": -0.2, "took_turn": True}]})
        for q in qs if q.question_id != qs[5].question_id])  # one question unanswered
    oracle = write_answers(tmp_path / "answers-oracle.jsonl", [
        answer_record(q.question_id, "tiny-oracle-0.5", ["a longer answer one", "a longer answer two"],
                      extra={"oracle_source": "embedded", "oracle_latency": 0.5,
                             "turns": [{"latency": 0.9, "took_turn": True}, {"latency": None, "took_turn": False}]})
        for q in qs])
    out = tmp_path / "judgments.jsonl"
    with LoopbackServer(reply=_judge_reply, override=_refuse) as srv:
        args = [str(front), str(oracle), "--model", "loopback-judge", "--base-url", srv.base_url, "-o", str(out)]
        first = _cli("judge", *args)
        assert first.returncode == 0, first.stderr
        calls = srv.calls
        again = _cli("judge", *args)
        assert again.returncode == 0, again.stderr
        assert srv.calls == calls + 2  # only the refused question's two turns are asked again: the rest is cached
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 * (29 + 30) and all(set(r) == FASTCHAT_JUDGMENT_KEYS for r in rows)  # FastChat's rows
    scores = {(r["model"], r["question_id"], r["turn"]): r["score"] for r in rows}
    # A marker in the first answer reaches the second turn's prompt too (both turns are shown): FastChat's reading
    # keeps the first of two ratings and an 11; no rating, or a refused call ("$ERROR$"), is -1
    for turn in (1, 2):
        assert scores[("tiny-none", qs[0].question_id, turn)] == -1
        assert scores[("tiny-none", qs[1].question_id, turn)] == 2
        assert scores[("tiny-none", qs[2].question_id, turn)] == 11
        assert scores[("tiny-none", qs[3].question_id, turn)] == -1
    refused = next(r for r in rows if r["question_id"] == qs[3].question_id and r["model"] == "tiny-none")
    assert refused["judgment"] == "$ERROR$"
    empty = next(r for r in rows if r["question_id"] == qs[4].question_id and r["turn"] == 2 and r["model"] == "tiny-none")
    assert 3 <= empty["score"] <= 7 and empty["user_prompt"].endswith("[Assistant]\n\n")  # judged like any answer
    assert all(r["judge"][0] == "loopback-judge" and r["judge"][1].startswith("single-") for r in rows)
    assert all(isinstance(r["score"], int) for r in rows)  # the literal, as FastChat writes it
    assert re.search(r"114 scored, 4 score -1", again.stdout)
    assert "answers to 29 of the 30 questions (only those are judged)" in again.stdout

    report = _cli("report", str(out), "--answers", str(front), "--answers", str(oracle), "-o", str(tmp_path / "rep"))
    assert report.returncode == 0, report.stderr
    assert "| tiny-none |" in report.stdout and "| Moshi (paper) |" in report.stdout
    png = (tmp_path / "rep" / "score_vs_latency.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "data:image/png;base64," in page and "tiny-oracle-0.5" in page
    line = next(ln for ln in report.stdout.splitlines() if ln.startswith("| tiny-none |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[-3:] == ["0.10", "0.40", "100%"]  # latency median, p90 (negative ones kept), took turn
    # the mean is show_result's: every score but -1, the 11 included
    kept = [r["score"] for r in rows if r["model"] == "tiny-none" and r["score"] != -1]
    assert f"{sum(kept) / len(kept):.2f}" in cells
    # counted, not changing the score: per model and category
    found = {}
    for ln in report.stdout.splitlines():
        c = [x.strip() for x in ln.strip("|").split("|")]
        if len(c) == 9 and c[0] in ("tiny-none", "tiny-oracle-0.5") and c[1] in PAPER_CATEGORIES:
            found[(c[0], c[1])] = list(map(int, c[2:]))
    totals = {m: [sum(v[i] for (mm, _), v in found.items() if mm == m) for i in range(7)]
              for m in ("tiny-none", "tiny-oracle-0.5")}
    # empty, silent, several, out of 1-10, single bracket, no rating, judge error
    assert totals["tiny-none"] == [1, 0, 2, 2, 0, 2, 2]
    assert totals["tiny-oracle-0.5"] == [0, 30, 0, 0, 0, 0, 0]  # it never took the second turn
    assert "Reference answers: mt_bench_reference_gpt-4.jsonl for" in report.stdout


def test_reference_answers_come_from_a_fastchat_answer_file_and_the_fallback_is_named(tmp_path):
    """FastChat judges math, reasoning and coding against a reference model's answers (its
    reference_answer/gpt-4.jsonl, shipped): every such prompt carries that file's answer, not the
    question file's reference; with --reference-answers question-file the report names the fallback."""
    qs = load_questions(shipped_questions())
    refs = load_references(shipped_references())
    reasoning = [q for q in qs if q.category == "reasoning"]
    assert all(q.question_id in refs for q in reasoning)
    assert any(refs[q.question_id][0] != q.reference[0] for q in reasoning)  # the two texts differ
    for q in reasoning:
        _, text = prompt_for(q, 1, ["an answer"], PROMPTS, refs)
        assert refs[q.question_id][0] in text
        _, text = prompt_for(q, 2, ["one", "two"], PROMPTS, refs)
        assert refs[q.question_id][0] in text and refs[q.question_id][1] in text
    answers = write_answers(tmp_path / "model_answer" / "m.jsonl",
                            [answer_record(q.question_id, "m", ["one", "two"]) for q in reasoning[:2]])
    with LoopbackServer(reply=lambda messages, asked: "Rating: [[5]]") as srv:
        shipped = _cli("judge", str(answers), "--model", "j", "--base-url", srv.base_url)
        assert shipped.returncode == 0, shipped.stderr
        judged = tmp_path / "model_judgment" / "j_single.jsonl"  # FastChat's layout, by default
        rows = [json.loads(line) for line in judged.read_text().splitlines()]
        assert {r["judge"][1] for r in rows} == {"single-math-v1", "single-math-v1-multi-turn"}
        assert all(refs[r["question_id"]][0] in r["user_prompt"] for r in rows)
        fallback = _cli("judge", str(answers), "--model", "j", "--base-url", srv.base_url, "--reference-answers",
                        "question-file", "-o", str(tmp_path / "fallback.jsonl"))
        assert fallback.returncode == 0, fallback.stderr
    rows = [json.loads(line) for line in (tmp_path / "fallback.jsonl").read_text().splitlines()]
    by_id = {q.question_id: q for q in reasoning}
    assert all(by_id[r["question_id"]].reference[0] in r["user_prompt"] for r in rows)
    report = _cli("report", str(tmp_path / "fallback.jsonl"), "-o", str(tmp_path / "rep"))
    assert "the question file's reference field (the fallback) for 4 judgments" in report.stdout
    report = _cli("report", str(judged), "-o", str(tmp_path / "rep2"))
    assert "Reference answers: mt_bench_reference_gpt-4.jsonl for 4 judgments" in report.stdout


def test_the_second_turn_of_a_special_question_still_judges():
    """Judgments of turn 2 show turn 1 too: a marker in turn 1's answer reaches the turn-2 prompt."""
    q = load_questions(shipped_questions())[0]
    _, text = prompt_for(q, 2, ["SAYS-NO-RATING one", "two"], PROMPTS)
    assert "SAYS-NO-RATING" in text


def test_scores_from_two_judges_are_never_in_one_table():
    rows = [{"question_id": 101, "model": "m", "judge": ["judge-a", "single-v1"], "score": 5, "turn": 1},
            {"question_id": 101, "model": "m", "judge": ["judge-b", "single-v1"], "score": 6, "turn": 1}]
    with pytest.raises(ReportError, match="2 judges"):
        collect(rows, {101: "reasoning"})

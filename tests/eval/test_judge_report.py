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
from kame_data.eval.judge import NO_RATING, OUT_OF_RANGE, SEVERAL, parse_rating, prompt_for, PROMPTS
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


@pytest.mark.parametrize("text, score, reason", [
    ("Good answer. Rating: [[8]]", 8.0, ""),
    ("Rating: [[7.5]]", 7.5, ""),
    ("[[6]] ... to repeat, [[6]]", 6.0, ""),
    ("I would give it an 8.", -1.0, NO_RATING),
    ("Rating: [8]", -1.0, NO_RATING),
    ("Either [[3]] or [[9]]", -1.0, SEVERAL),
    ("Rating: [[11]]", -1.0, OUT_OF_RANGE),
    ("Rating: [[0]]", -1.0, OUT_OF_RANGE),
    ("", -1.0, NO_RATING),
])
def test_ratings_are_parsed_or_dropped_with_their_reason(text, score, reason):
    assert parse_rating(text) == (score, reason)


@given(st.text(max_size=200))
def test_any_judgment_gives_a_score_in_range_or_a_reason(text):
    score, reason = parse_rating(text)
    assert (1.0 <= score <= 10.0 and reason == "") or (score == -1.0 and reason in (NO_RATING, SEVERAL, OUT_OF_RANGE))


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
    assert len(rows) == 2 * (29 + 30) and all(FASTCHAT_JUDGMENT_KEYS <= set(r) for r in rows)
    reasons = {(r["model"], r["question_id"], r["turn"]): r.get("reason") for r in rows if r["score"] == -1}
    # A marker in the first answer reaches the second turn's prompt too (both turns are shown).
    expected = {0: "no_rating", 1: "several_ratings", 2: "out_of_range", 3: "judge_refused"}
    assert reasons == {**{("tiny-none", qs[k].question_id, turn): why for k, why in expected.items() for turn in (1, 2)},
                       ("tiny-none", qs[4].question_id, 2): "no_answer"}  # an empty second answer
    assert all(r["judge"][0] == "loopback-judge" for r in rows)
    assert re.search(r"109 scored, 9 dropped", again.stdout) and "dropped judge_refused: 2" in again.stdout
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

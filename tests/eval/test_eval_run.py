"""The whole evaluation on the CPU: the tiny model trained by `kame-data train`, the spoken question set,
`eval run` with the oracle off and with the embedded simulator 0.5 s late, a loopback judge answering
[[N]], and the report; a run killed between questions redoes nothing it finished."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kame_data.eval.answers import read_answers
from tests.loopback_server import LoopbackServer

pytestmark = pytest.mark.slow  # the tiny model, Whisper, TTS and the embedded simulator

CLI = [sys.executable, "-m", "kame_data.cli.main", "eval"]


def _eval(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("eval") / "built"
    r = _eval("build", "-o", str(out), "--limit", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_run_judge_and_report_on_the_tiny_model(built, tiny_run, tmp_path):
    _, ckpt = tiny_run
    out = tmp_path / "eval"
    common = ["--built", str(built), "-o", str(out), "--answer-seconds", "2"]
    alone = _eval("run", str(ckpt), *common, "--oracle", "none", "--name", "tiny-alone")
    assert alone.returncode == 0, alone.stderr[-3000:]
    live = _eval("run", str(ckpt), *common, "--oracle", "embedded", "--delay", "0.5", "--name", "tiny-oracle")
    assert live.returncode == 0, live.stderr[-3000:]

    with LoopbackServer() as simulator:  # an OpenAI-compatible back-end, served as hosted-fast times it
        served = _eval("run", str(ckpt), *common, "--oracle", "openai", "--model", "loopback", "--base-url",
                       simulator.base_url, "--latency", "hosted-fast", "--name", "tiny-served")
        assert served.returncode == 0, served.stderr[-3000:]
        assert simulator.calls > 0
    assert read_answers(out / "model_answer" / "tiny-served.jsonl")[101]["kame"]["latency_preset"] == "hosted-fast"

    answers = {name: read_answers(out / "model_answer" / f"{name}.jsonl")
               for name in ("tiny-alone", "tiny-oracle", "tiny-oracle-backend")}
    for name, rows in answers.items():
        assert len(rows) == 2 and all(len(r["choices"][0]["turns"]) == 2 for r in rows.values()), name
    oracle = [json.loads((out / "runs" / "tiny-oracle" / f"q{q}.json").read_text()) for q in answers["tiny-oracle"]]
    assert all(t["events"] > 0 and t["oracle_final"] for r in oracle for t in r["turns"])  # the simulator was heard
    backend_turns = [t for r in answers["tiny-oracle-backend"].values() for t in r["choices"][0]["turns"]]
    assert backend_turns == [t["oracle_final"] for r in oracle for t in r["turns"]]
    extra = next(iter(answers["tiny-oracle"].values()))["kame"]
    assert extra["oracle_source"] == "embedded" and extra["oracle_latency"] == 0.5
    for r in answers["tiny-alone"].values():
        for t in r["kame"]["turns"]:
            assert t["took_turn"] == (t["latency"] is not None)

    # Killed between questions: the finished one is kept, only the other is answered again.
    done = out / "runs" / "tiny-alone"
    first, second = sorted(done.glob("q*.json"))
    kept = first.stat().st_mtime_ns
    second.unlink()
    again = _eval("run", str(ckpt), *common, "--oracle", "none", "--name", "tiny-alone")
    assert again.returncode == 0, again.stderr[-3000:]
    assert first.stat().st_mtime_ns == kept and second.is_file()
    untouched = {p: p.stat().st_mtime_ns for p in done.iterdir()}
    once_more = _eval("run", str(ckpt), *common, "--oracle", "none", "--name", "tiny-alone")
    assert once_more.returncode == 0 and {p: p.stat().st_mtime_ns for p in done.iterdir()} == untouched

    files = sorted(str(f) for f in (out / "model_answer").glob("*.jsonl"))  # every run, as gen_judgment takes them
    rates = iter(range(10**6))
    with LoopbackServer(reply=lambda messages, asked: f"Hard to follow. Rating: [[{1 + next(rates) % 9}]]") as judge:
        judged = _eval("judge", *files, "--model", "loopback-judge", "--base-url", judge.base_url)
    assert judged.returncode == 0, judged.stderr[-3000:]
    judgments = out / "model_judgment" / "loopback-judge_single.jsonl"  # FastChat's layout, by default
    report = _eval("report", str(judgments), *sum((["--answers", f] for f in files), []), "-o", str(out / "report"))
    assert report.returncode == 0, report.stderr[-3000:]
    assert "| tiny-oracle-backend |" in report.stdout and "| tiny-alone |" in report.stdout
    assert (out / "report" / "score_vs_latency.png").read_bytes()[:4] == b"\x89PNG"
    print(report.stdout)
    _read_as_fastchat(out, report.stdout)


def _read_as_fastchat(bench: Path, report: str) -> None:
    """The subset run's folder read the way FastChat's llm_judge reads a bench folder: gen_judgment's
    load_questions (question.jsonl), load_model_answers (model_answer/*.jsonl, the model named by the
    file) and check_data (every model answers every question; a reference answer for every math,
    reasoning or coding question), then show_result's single mode (rows with score -1 left out, the mean
    per model). Every model and question is present and the means are the report's."""
    questions = [json.loads(line) for line in (bench / "question.jsonl").read_text().splitlines() if line]
    assert len(questions) == 2  # `eval build --limit 2`: the question file holds exactly the questions answered
    models = {}
    for f in sorted((bench / "model_answer").glob("*.jsonl")):
        models[f.name[:-6]] = {r["question_id"]: r for r in map(json.loads, f.read_text().splitlines())}
    refs = {json.loads(line)["question_id"] for line in (bench / "reference_answer" / "gpt-4.jsonl").read_text().splitlines()}
    for m, answers in models.items():
        assert all(q["question_id"] in answers for q in questions), m
    assert all(q["question_id"] in refs for q in questions if q["category"] in ("math", "reasoning", "coding"))
    rows = [json.loads(line) for line in (bench / "model_judgment" / "loopback-judge_single.jsonl").read_text().splitlines()]
    assert {(r["model"], r["question_id"]) for r in rows} == {(m, q["question_id"]) for m in models for q in questions}
    for m in models:
        scores = [r["score"] for r in rows if r["model"] == m and r["score"] != -1]
        line = next(ln for ln in report.splitlines() if ln.startswith(f"| {m} |"))
        overall = line.strip("|").split("|")[-6].strip()  # the overall column: judged, dropped, latency x2, took turn follow
        assert overall == f"{sum(scores) / len(scores):.2f}", (m, overall, scores)

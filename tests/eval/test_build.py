"""`kame-data eval build`: the question set spoken by the screened user pool, every turn heard by the
real Whisper under the WER bound, the end of speech recorded, and a rerun that redoes nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import soundfile as sf

from kame_data.eval.build import read_built
from kame_data.eval.questions import load_questions, shipped_questions

pytestmark = pytest.mark.slow  # real piper, hibari, Kokoro and Whisper


def _build(out, *args):
    return subprocess.run([sys.executable, "-m", "kame_data.cli.main", "eval", "build", "-o", str(out), *args],
                          capture_output=True, text=True, timeout=1200)


def test_the_questions_are_heard_as_written_and_a_rerun_redoes_nothing(tmp_path):
    out = tmp_path / "eval"
    first = _build(out, "--limit", "2")
    assert first.returncode == 0, first.stderr
    done = {p.name: p.stat().st_mtime_ns for p in (out / "audio").iterdir()}
    assert len(done) == 4
    again = _build(out, "--limit", "3")
    assert again.returncode == 0, again.stderr
    assert all((out / "audio" / name).stat().st_mtime_ns == t for name, t in done.items())  # not spoken again
    rows = read_built(out)
    qs = load_questions(shipped_questions())[:3]
    assert [r["question_id"] for r in rows] == [q.question_id for q in qs]
    for row, q in zip(rows, qs):
        assert [t["text"] for t in row["turns"]] == list(q.turns)
        for t in row["turns"]:
            assert t["wer"] <= 0.05 and t["wer_ok"], t
            assert t["pace"] in (1.0, 0.85)
            audio, sr = sf.read(out / t["audio"])
            assert sr == 24000 and audio.ndim == 1
            assert 0.5 < t["speech_end"] <= t["seconds"] == pytest.approx(len(audio) / sr, abs=1e-3)
    assert json.loads((out / "questions" / f"{qs[0].question_id}.json").read_text())["category"] == qs[0].category
    assert "worst WER" in again.stdout

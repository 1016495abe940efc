"""`kame-data infer`: a tiny model from `kame-data train` answers a dialogue's user channel with the
oracle stream from the row's ladder, blank, or from a live OpenAI-compatible server with a delay."""

import json
import os
import subprocess

import numpy as np
import pytest
import soundfile as sf

from kame_data.train import missing_dependencies
from tests.conftest import CLI

MISSING = missing_dependencies()
pytestmark = [pytest.mark.slow,  # trains a tiny model, then runs it frame by frame
              pytest.mark.skipif(bool(MISSING), reason=f"kame_data.train needs {', '.join(MISSING)}")]

ROW = "synthetic-0-v0"
LEAD = 1  # the tiny model's text delay is 0: frame f's oracle token is read at step f + 1


def _infer(ckpt, dataset, out, *args):
    r = subprocess.run(CLI + ["infer", str(ckpt), "--dataset", str(dataset), "--id", ROW, "--out", str(out), *args],
                       capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads((out / "infer.json").read_text())


def test_infer_writes_the_reply_and_a_blank_oracle_changes_it(tiny_run, tmp_path):
    dataset, ckpt = tiny_run
    fed = _infer(ckpt, dataset, tmp_path / "row")
    blank = _infer(ckpt, dataset, tmp_path / "none", "--oracle", "none")
    T = fed["frames"]
    assert T > 100 and fed["events_fed"] > 3 and blank["events_fed"] == 0
    for run, folder in ((fed, tmp_path / "row"), (blank, tmp_path / "none")):
        reply, sr = sf.read(folder / "reply.wav")
        assert sr == 24000 and reply.ndim == 1 and abs(len(reply) - T * 1920) <= 1920 and np.abs(reply).max() > 0
        assert sf.info(folder / "dialogue.wav").channels == 2
        assert (folder / "reply.txt").read_text().strip() == run["text"] and run["text"]
        assert len(run["text_tokens"]) == T and np.asarray(run["audio_codes"]).shape == (2, T)
    start = 200  # the tiny model's text_card: the oracle's start token
    first = fed["oracle_tokens"].index(start)
    assert set(blank["oracle_tokens"]) == {3} and first == min(e["frame"] for e in fed["events"])
    # Same seed, same user: identical until the model reads the first oracle token, different after.
    assert fed["text_tokens"][:first + LEAD] == blank["text_tokens"][:first + LEAD]
    assert fed["text_tokens"] != blank["text_tokens"] or fed["audio_codes"] != blank["audio_codes"]


def test_a_live_oracle_answers_each_step_and_arrives_late(tiny_run, tmp_path, monkeypatch):
    from kame_data.llm.config import BackendConfig
    from kame_data.train.infer import InferConfig, infer
    from kame_data.train.streams import frame_of_ms
    from tests.loopback_server import LoopbackServer

    dataset, ckpt = tiny_run
    monkeypatch.setenv("KAME_TEST_KEY", "sk-test")
    with LoopbackServer() as srv:
        cfg = InferConfig(oracle="openai", delay=1.0, max_seconds=3.2,
                          backend=BackendConfig(kind="openai", model="loopback", base_url=srv.base_url,
                                                api_key_env="KAME_TEST_KEY"))
        infer(ckpt, dataset, ROW, tmp_path / "live", cfg)
        asked = [body for _, body, _, _ in srv.answers]
    run = json.loads((tmp_path / "live" / "infer.json").read_text())
    row_events = [e for e in _row(dataset)["oracle"]]
    assert len(run["events"]) == len(row_events)  # one request per ladder step
    assert [e["timestamp_ms"] for e in run["events"]] == [e["timestamp_ms"] + 1000 for e in row_events]
    assert all(e["prediction"].startswith("I think") and e["hint"] == "" for e in run["events"])
    starts = {i for i, t in enumerate(run["oracle_tokens"]) if t == 200}
    expected = {frame_of_ms(e["timestamp_ms"]) for e in run["events"] if frame_of_ms(e["timestamp_ms"]) < run["frames"]}
    assert run["frames"] == 40 and starts == expected
    assert len(expected) < len(row_events)  # 3.2 s: the later events fall past the end
    assert len(asked) == len(row_events)  # the simulator saw the conversation, never the true reply
    assert all(row_events[-1]["hint"] not in json.dumps(body) for body in asked)
    assert [e["conversation_context"] for e in run["events"]] == [e["conversation_context"] for e in row_events]


def test_a_live_oracle_timed_by_a_latency_model(tiny_run, tmp_path, monkeypatch):
    """--latency: each reply starts where the latency model says its first chunk arrives (here a
    1 s time to first token and an instant stream), and the tokens after it are the ones the
    served stream reads."""
    from kame_data.llm.config import BackendConfig
    from kame_data.oracle.latency import arrivals, parse_latency
    from kame_data.train.infer import InferConfig, infer
    from tests.loopback_server import LoopbackServer

    dataset, ckpt = tiny_run
    monkeypatch.setenv("KAME_TEST_KEY", "sk-test")
    latency = {"first_token": 1.0}
    with LoopbackServer() as srv:
        cfg = InferConfig(oracle="openai", latency=latency, max_seconds=3.2,
                          backend=BackendConfig(kind="openai", model="loopback", base_url=srv.base_url,
                                                api_key_env="KAME_TEST_KEY"))
        infer(ckpt, dataset, ROW, tmp_path / "live", cfg)
    run = json.loads((tmp_path / "live" / "infer.json").read_text())
    row_events = _row(dataset)["oracle"]
    predicted = arrivals(parse_latency(latency), [(e["timestamp_ms"], e["prediction"]) for e in run["events"]],
                         0, f"{ROW}/0")
    assert [e["timestamp_ms"] for e in run["events"]] == [e["timestamp_ms"] for e in row_events]  # no --delay shift
    assert [a.first_token_ms for a in predicted] == [e["timestamp_ms"] + 1000 for e in row_events]
    starts = sorted(i for i, t in enumerate(run["oracle_tokens"]) if t == 200)
    want = sorted({int(a.first_token_ms / 1000 * 12.5) for a in predicted if a.first_token_ms / 1000 * 12.5 < 40})
    assert starts == want and starts[0] == int((row_events[0]["timestamp_ms"] + 1000) / 1000 * 12.5)
    assert all(e["arrival"]["first_token_ms"] == a.first_token_ms for e, a in zip(run["events"], predicted))


def _row(dataset):
    from kame_data.dataset.folder import DatasetDir

    return next(DatasetDir.open(dataset).rows(ids=[ROW]))


def test_infer_names_what_is_wrong(tiny_run, tmp_path):
    dataset, ckpt = tiny_run
    base = CLI + ["infer", str(ckpt), "--dataset", str(dataset), "--out", str(tmp_path / "o")]
    r = subprocess.run(base + ["--id", "nope"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "no row with id 'nope'" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(base + ["--id", ROW, "--oracle", "openai"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "--model" in r.stderr
    r = subprocess.run(base + ["--id", ROW, "--oracle", "psychic"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "--oracle" in r.stderr
    assert not (tmp_path / "o").exists()

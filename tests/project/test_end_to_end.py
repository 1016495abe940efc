"""The quickstart recipe end to end through the real CLI: real TTS, the real embedded LLM,
real Parquet; then what a trainer does with it (load_dataset, decode audio) and `validate`."""

import json
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kame_data.audio import decode
from kame_data.dataset.validate import DatasetInvalid, validate_dataset
from kame_data.records import ORACLE_REFERENCE_FIELDS
from tests.audio_checks import assert_speech_only_at_words

pytestmark = pytest.mark.slow

from tests.conftest import CLI


def _rows(out: Path) -> list[dict]:
    return [row for p in sorted((out / "data").glob("*.parquet")) for row in pq.read_table(p).to_pylist()]


def test_outputs_present(quickstart_out):
    names = {p.name for p in quickstart_out.iterdir()}
    assert {"data", "README.md", "manifest.json", "rejects.jsonl", "run.log"} <= names
    assert not list(quickstart_out.rglob("*.tmp")) and not (quickstart_out / ".staging").exists()
    m = json.loads((quickstart_out / "manifest.json").read_text())
    assert m["counts"]["samples"] == 3 and set(m["per_source"]) == {"mmlu_pro", "gsm8k", "hssbench"}
    assert m["llm"]["calls"] > 0
    # CPU per step (worker processes where it has them: the embedded model's instances, speak's
    # workers; else the driver threads that ran it: the template script, the writer), and the run's
    # own process
    assert set(m["wall"]) | {"write"} <= set(m["cpu"]) and m["cpu"]["oracle"] > 0 and m["cpu"]["driver"] > 0
    assert 0 < m["cpu"]["script"] + m["cpu"]["write"] < m["cpu"]["driver"]


def test_load_dataset_audio_feature(quickstart_out):
    import datasets

    ds = datasets.load_dataset("parquet", data_dir=str(quickstart_out / "data"), split="train")
    assert ds.features["audio"] == datasets.Audio(sampling_rate=24000)
    assert len(ds) == 3
    raw = ds.cast_column("audio", datasets.Audio(decode=False))
    for row in raw:
        pcm, sr = decode(row["audio"]["bytes"])
        assert sr == 24000 and pcm.shape[1] == 2
        assert abs(len(pcm) / sr - row["duration"]) < 0.01
        # the user channel carries the room and the noise of the acoustics step: only the clean
        # assistant channel is silent between words (the quality figures judged the clean user render)
        assert_speech_only_at_words(pcm, sr, row["words"], speakers=("A",) if row["acoustics"] else ("A", "B"))
        if row["acoustics"]:
            assert all(t["vad_outside_s"] <= 1.0 and t["vad_word_share"] >= 0.5 for t in row["turns"])


def test_rows_follow_design(quickstart_out):
    rows = _rows(quickstart_out)
    levels = set()
    for row in rows:
        words = row["words"]
        assert {w["speaker"] for w in words} == {"A", "B"}
        assert [(w["start"], w["end"]) for w in words] == sorted((w["start"], w["end"]) for w in words)
        assert all(0 <= w["start"] <= w["end"] <= row["duration"] for w in words)
        assert row["oracle"], row["id"]
        for e in row["oracle"]:
            assert list(e)[: len(ORACLE_REFERENCE_FIELDS)] == list(ORACLE_REFERENCE_FIELDS)
            assert e["channel"] == 0  # target = the assistant's channel
            assert e["prediction"].strip()
            assert 0 <= e["timestamp_ms"] <= row["duration"] * 1000
            assert e["conversation_context"].startswith("B: ")
            assert e["trigger_word"] == e["recent_words"][-1]
            if e["level"] == 5:
                # the assistant's whole answer (its backchannels are not on the floor)
                reply = [w["word"] for w in words if w["speaker"] == "A" and not w["backchannel"]]
                assert e["prediction"] == " ".join(reply) == e["hint"]
            levels.add(e["level"])
    assert {0, 5} <= levels


def test_validate_passes_then_names_row_and_field(quickstart_out, tmp_path):
    r = subprocess.run(CLI + ["validate", str(quickstart_out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert validate_dataset(quickstart_out).rows == 3

    bad = tmp_path / "bad"
    shutil.copytree(quickstart_out, bad)
    shard = sorted((bad / "data").glob("*.parquet"))[0]
    table = pq.read_table(shard)
    rows = table.to_pylist()
    rows[1]["words"][3], rows[1]["words"][4] = rows[1]["words"][4], rows[1]["words"][3]
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), shard)
    with pytest.raises(DatasetInvalid) as e:
        validate_dataset(bad)
    assert e.value.row == rows[1]["id"] and e.value.field == "words[4].start"
    r = subprocess.run(CLI + ["validate", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and rows[1]["id"] in r.stderr and "words[4].start" in r.stderr

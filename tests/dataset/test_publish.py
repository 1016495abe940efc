"""Publishing: splits by item, shards by rows or size, Hugging Face loading, the card, and push."""

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from kame_data.audio import wav_bytes
from kame_data.dataset.card import render_card
from kame_data.dataset.shards import (
    PublishConfigError,
    ShardWriter,
    split_fractions,
    split_of,
)
from kame_data.recipe import RecipeError, load_recipe
from kame_data.runner.config import RunConfig
from tests.conftest import CLI

SPLITS = [("train", 0.8), ("validation", 0.1), ("test", 0.1)]


def make_row(row_id: str, item_id: str | None = None, seconds: float = 1.0, source: str = "gsm8k") -> dict:
    """A small valid row (stereo silence with two words per speaker) for tests without TTS."""
    sr = 24000
    pcm = np.zeros((int(seconds * sr), 2), dtype=np.int16)
    words = [{"speaker": "B", "word": "two", "start": 0.1, "end": 0.3},
             {"speaker": "B", "word": "plus", "start": 0.3, "end": 0.5},
             {"speaker": "A", "word": "four", "start": 0.6, "end": 0.8},
             {"speaker": "A", "word": "ok", "start": 0.8, "end": 0.9}]
    event = {"timestamp_ms": 500, "conversation_context": "B: two plus", "prediction": "four", "total_word_count": 2,
             "trigger_word": "plus", "recent_words": ["two", "plus"], "current_spoken_ratio": 1.0, "channel": 0,
             "hint": "four ok", "level": 5}
    return {
        "id": row_id, "item_id": item_id or row_id, "source": source, "category": "math", "variant": 0,
        "duration": seconds, "sample_rate": sr, "audio": {"bytes": wav_bytes(pcm, sr), "path": f"{row_id}.wav"},
        "turns": [{"role": "user", "speaker": "B", "text": "2+2", "spoken": "two plus", "start": 0.1, "end": 0.5,
                   "voice": "v"},
                  {"role": "assistant", "speaker": "A", "text": "4", "spoken": "four ok", "start": 0.6, "end": 0.9,
                   "voice": "v"}],
        "words": words, "oracle": [event],
    }


# ---- splits --------------------------------------------------------------------------------------

def test_split_assignment_is_deterministic_and_by_item():
    ids = [f"item-{i}" for i in range(3000)]
    first = [split_of(i, 7, SPLITS) for i in ids]
    assert first == [split_of(i, 7, SPLITS) for i in ids]
    counts = Counter(first)
    assert abs(counts["train"] / 3000 - 0.8) < 0.04 and abs(counts["test"] / 3000 - 0.1) < 0.03
    assert first != [split_of(i, 8, SPLITS) for i in ids]  # the seed matters


def test_variants_of_one_item_share_a_split(tmp_path):
    w = ShardWriter(tmp_path, splits=SPLITS, seed=3, rows_per_shard=5)
    placed = {}
    for item in range(40):
        for v in range(3):
            placed.setdefault(f"it{item}", set()).add(w.add(make_row(f"it{item}-v{v}", f"it{item}")))
    shards = w.finish()
    assert all(len(s) == 1 for s in placed.values())
    seen = {}
    for s in shards:
        for item in pq.read_table(tmp_path / s["path"], columns=["item_id"]).column("item_id").to_pylist():
            assert seen.setdefault(item, s["split"]) == s["split"]
    assert {s["split"] for s in shards} == {"train", "validation", "test"}


def test_split_config_errors():
    assert split_fractions({}) == [("train", 1.0)]
    assert split_fractions({"split": "dev"}) == [("dev", 1.0)]
    with pytest.raises(PublishConfigError, match="sum to 1"):
        split_fractions({"splits": {"train": 0.8, "test": 0.1}})
    with pytest.raises(PublishConfigError, match="not both"):
        split_fractions({"split": "train", "splits": {"train": 1.0}})


def test_recipe_schema_accepts_publish_keys(tmp_path):
    base = "name: t\nsources: [{kind: gsm8k, path: x.jsonl}]\n"
    ok = tmp_path / "ok.yaml"
    ok.write_text(base + "publish: {splits: {train: 0.8, validation: 0.1, test: 0.1}, shard_size_mb: 200, rows_per_shard: 50}\n")
    assert RunConfig.resolve(load_recipe(ok)).publish.shard_size_mb == 200
    bad = tmp_path / "bad.yaml"
    bad.write_text(base + "publish: {splits: {Train: 1.0}}\n")
    with pytest.raises(RecipeError, match=r"recipe bad.yaml: publish\.splits: 'Train' does not match"):
        RunConfig.resolve(load_recipe(bad))


# ---- shards --------------------------------------------------------------------------------------

def test_shards_close_on_rows_or_size(tmp_path):
    by_rows = ShardWriter(tmp_path / "a", rows_per_shard=3)
    for i in range(7):
        by_rows.add(make_row(f"r{i}"))
    shards = by_rows.finish()
    assert [s["rows"] for s in shards] == [3, 3, 1]
    assert [s["path"] for s in shards] == [f"data/train-{i:05d}-of-00003.parquet" for i in range(3)]

    row_mb = len(make_row("x", seconds=2.0)["audio"]["bytes"]) / (1 << 20)  # about 0.18 MiB
    by_size = ShardWriter(tmp_path / "b", rows_per_shard=100, shard_size_mb=row_mb * 2.5)
    for i in range(7):
        by_size.add(make_row(f"r{i}", seconds=2.0))
    shards = by_size.finish()
    assert [s["rows"] for s in shards] == [2, 2, 2, 1]
    assert all(s["bytes"] <= row_mb * 2.5 * (1 << 20) for s in shards)
    for s in shards:
        md = pq.ParquetFile(tmp_path / "b" / s["path"]).metadata
        assert md.row_group(0).column(0).compression == "ZSTD"
    assert not (tmp_path / "b" / ".staging").exists()


def test_row_groups_are_small(tmp_path):
    w = ShardWriter(tmp_path, rows_per_shard=50, row_group_size=4)
    for i in range(10):
        w.add(make_row(f"r{i}"))
    (shard,) = w.finish()
    md = pq.ParquetFile(tmp_path / shard["path"]).metadata
    assert [md.row_group(i).num_rows for i in range(md.num_row_groups)] == [4, 4, 2]


def test_finish_removes_stale_shards(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train-00000-of-00009.parquet").write_bytes(b"old")
    w = ShardWriter(tmp_path)
    w.add(make_row("r0"))
    w.finish()
    assert [p.name for p in (tmp_path / "data").iterdir()] == ["train-00000-of-00001.parquet"]


# ---- loading with datasets -----------------------------------------------------------------------

def _check_features(features):
    import datasets

    assert features["audio"] == datasets.Audio(sampling_rate=24000)
    assert features["id"] == datasets.Value("string")
    assert features["words"].feature["start"] == datasets.Value("float64")
    assert features["oracle"].feature["level"] == datasets.Value("int32")
    assert features["oracle"].feature["recent_words"] == datasets.List(datasets.Value("string"))


def _raw(ds):
    import datasets

    return ds.cast_column("audio", datasets.Audio(decode=False))


@pytest.mark.slow
def test_load_dataset_every_way(quickstart_out, tmp_path):
    import datasets

    from kame_data.audio import decode

    cache = str(tmp_path / "hf-cache")
    m = json.loads((quickstart_out / "manifest.json").read_text())
    n = m["counts"]["samples"]

    by_parquet = datasets.load_dataset("parquet", data_dir=str(quickstart_out / "data"), split="train", cache_dir=cache)
    _check_features(by_parquet.features)
    assert len(by_parquet) == n

    by_folder = datasets.load_dataset(str(quickstart_out), cache_dir=cache)
    assert set(by_folder) == {s["split"] for s in m["shards"]}
    _check_features(by_folder["train"].features)
    assert sorted(_raw(by_folder["train"])["id"]) == sorted(by_parquet["id"])

    streamed = datasets.load_dataset(str(quickstart_out), split="train", streaming=True)
    rows = list(_raw(streamed))
    assert len(rows) == n
    pcm, sr = decode(rows[0]["audio"]["bytes"])
    assert sr == 24000 and pcm.shape[1] == 2

    by_folder.save_to_disk(str(tmp_path / "saved"))
    reloaded = datasets.load_from_disk(str(tmp_path / "saved"))
    _check_features(reloaded["train"].features)
    assert _raw(reloaded["train"])[0]["audio"]["bytes"] == _raw(by_folder["train"])[0]["audio"]["bytes"]


# ---- the card ------------------------------------------------------------------------------------

def _header(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n", 2)[1])


@pytest.mark.slow
def test_card_matches_manifest(quickstart_out):
    m = json.loads((quickstart_out / "manifest.json").read_text())
    text = (quickstart_out / "README.md").read_text()
    h = _header(text)
    assert h["configs"] == [{"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*.parquet"}]}]
    assert h["dataset_info"]["splits"] == [{"name": "train", "num_bytes": sum(s["bytes"] for s in m["shards"]),
                                            "num_examples": m["counts"]["samples"]}]
    assert h["size_categories"] == ["n<1K"] and h["language"] == ["en"]
    assert set([h["license"]] if isinstance(h["license"], str) else h["license"]) == set(m["licenses"].values())
    assert {f["name"] for f in h["dataset_info"]["features"]} >= {"audio", "words", "oracle"}
    assert f"| dialogues | {m['counts']['samples']} |" in text
    assert f"| audio hours | {m['audio_hours']} |" in text
    assert f"| oracle events | {m['oracle_events']} |" in text
    # the quickstart's Whisper QA (every turn) and answer round trip, with the failure rate's interval
    q = m["quality"]
    assert "### Speech round trip (Whisper)" in text and f"median {q['wer']['median']}, mean {q['wer']['mean']}" in text
    assert q["answer_check"]["dialogues"] >= m["counts"]["samples"] and "95% interval" in text
    for level, count in m["levels"].items():
        f1, rouge = m["oracle_f1_by_level"][level], m["oracle_rouge_l_by_level"][level]
        assert f"| events at level {level} | {count} (mean token-F1 to the true reply {f1:.2f}, ROUGE-L {rouge:.2f}) |" in text
    for source, sim in m["oracle_similarity_by_source"].items():
        assert f"| oracle predictions on {source}, levels 0-4 | token-F1 {sim['token_f1']:.2f}, " in text
    assert set(m["oracle_similarity_by_source"]) == set(m["per_source"])
    assert m["llm"]["model_license"] in text and f"prompts v{m['llm']['prompt_version']}" in text
    for reason, count in m["rejects"].items():
        assert f"| rejected: {reason} | {count} |" in text
    for source, count in m["per_source"].items():
        assert f"| dialogues from {source} | {count} (" in text
    assert f"seed {m['recipe']['seed']}" in text and m["llm"]["model"] in text
    for png in ("assets/levels.png", "assets/durations.png"):
        assert f"]({png})" in text
        assert (quickstart_out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "## Limitations" in text and "## Citation" in text


def _manifest(**over) -> dict:
    m = {
        "format": "kame-data/1", "recipe": {"name": "t", "seed": 5, "sources": [{"kind": "hssbench", "hub": "dozo/HSSBench"}],
                                             "publish": {"splits": {"train": 0.9, "test": 0.1}}},
        "recipe_name": "t", "config_hash": "0123456789abcdef", "versions": {"kame-data": "0.1.0"},
        "counts": {"samples": 12}, "per_source": {"hssbench": 12}, "licenses": {"hssbench": "unknown"},
        "rejects": {"needs_image": 2}, "timings": {"total": 1.0}, "levels": {"0": 3, "5": 4}, "audio_hours": 0.1,
        "oracle_events": 7, "llm": {"backend": "openai", "model": "gpt-4.1-nano"},
        "shards": [{"path": "data/train-00000-of-00001.parquet", "split": "train", "rows": 10, "bytes": 100},
                   {"path": "data/test-00000-of-00001.parquet", "split": "test", "rows": 2, "bytes": 20}],
    }
    m.update(over)
    return m


def test_card_warns_on_unlicensed_source_and_shows_quality():
    text = render_card(_manifest(quality={"wer": {"mean": 0.042}, "timing_error_ms": {"p95": 31}}))
    h = _header(text)
    assert h["license"] == "unknown"
    assert h["source_datasets"] == ["extended|dozo/HSSBench"]
    assert [d["split"] for d in h["configs"][0]["data_files"]] == ["train", "test"]
    assert [(s["name"], s["num_examples"]) for s in h["dataset_info"]["splits"]] == [("train", 10), ("test", 2)]
    assert "**Warning:** hssbench has no stated license" in text
    assert "| wer.mean | 0.042 |" in text and "| timing_error_ms.p95 | 31 |" in text
    assert "train 0.9, test 0.1" in text


def test_card_says_the_dialogues_asked_and_why_short():
    """The allocation (kame_data/sources/allocate.py) as the manifest keeps it: asked, passed and drawn,
    handed to the script, published, and the shortfall with its reasons plus what later steps lost."""
    from kame_data.schema import validate

    allocation = {"hssbench": {"asked": 100, "target": 100, "items": 23, "dialogues": 14, "shortfall": 86,
                               "items_lost": 0, "max_variants": 4, "refused": {"too_long": 2},
                               "reasons": {"max_variants": 8, "too_long": 78}, "read": 41, "passed": 23,
                               "filtered": {"needs_image": 11}}}
    m = _manifest(allocation=allocation, format="kame-data/1", recipe={}, timings={"total": 1.0})
    validate("manifest", m)
    text = render_card(m)
    assert "### Dialogues asked and made" in text
    row = next(line for line in text.splitlines() if line.startswith("| hssbench | 100 |"))
    assert "| 23 / 23 | 14 | 12 | 88 |" in row
    assert "max_variants 8, too_long 78, lost in later steps (rejects below) 2" in row


def test_card_escapes_table_cells():
    text = render_card(_manifest(rejects={"bad|reason\nx": 1}))
    assert "| rejected: bad\\|reason x | 1 |" in text


# ---- push ----------------------------------------------------------------------------------------

FAKE_TOKEN = "hf_FakeTokenForTests0123456789abcdef"


def _push(out: Path, **env) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    e.update(env)
    return subprocess.run(CLI + ["push", str(out), "--repo", "someone/kame-test"], capture_output=True, text=True,
                          env=e, timeout=60)


@pytest.fixture
def tiny_out(tmp_path) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps(_manifest()))
    return out


def test_push_unreachable_endpoint_fails_fast_without_token(tiny_out):
    r = _push(tiny_out, HF_TOKEN=FAKE_TOKEN, HF_ENDPOINT="http://127.0.0.1:9")
    assert r.returncode == 1
    assert "cannot reach the hub at http://127.0.0.1:9" in r.stderr
    assert FAKE_TOKEN not in r.stdout + r.stderr


def test_push_offline_fails_with_cause(tiny_out):
    r = _push(tiny_out, HF_TOKEN=FAKE_TOKEN, HF_HUB_OFFLINE="1")
    assert r.returncode == 1 and "HF_HUB_OFFLINE" in r.stderr
    assert FAKE_TOKEN not in r.stdout + r.stderr


def test_push_without_token_or_with_bad_repo(tiny_out):
    r = _push(tiny_out)
    assert r.returncode == 1 and "HF_TOKEN is not set" in r.stderr
    r = subprocess.run(CLI + ["push", str(tiny_out), "--repo", "../x"], capture_output=True, text=True,
                       env={**os.environ, "HF_TOKEN": FAKE_TOKEN})
    assert r.returncode == 1 and "NAMESPACE/NAME" in r.stderr


def test_push_errors_from_the_hub_are_scrubbed(tiny_out, monkeypatch, caplog):
    """A hub error that echoes the token (as some HTTP errors do) must not carry it out."""
    import huggingface_hub

    from kame_data.dataset import push

    class Boom(huggingface_hub.HfApi):
        def create_repo(self, *a, **k):
            raise RuntimeError(f"401 for token {FAKE_TOKEN}")

    monkeypatch.setenv("HF_TOKEN", FAKE_TOKEN)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(push, "_check_reachable", lambda endpoint: None)
    monkeypatch.setattr(huggingface_hub, "HfApi", Boom)
    caplog.set_level("DEBUG")
    with pytest.raises(push.PushError) as e:
        push.push_dataset(tiny_out, "someone/kame-test", validate=False)
    assert FAKE_TOKEN not in str(e.value) and "401" in str(e.value)
    assert e.value.__cause__ is None and e.value.__suppress_context__
    assert FAKE_TOKEN not in caplog.text

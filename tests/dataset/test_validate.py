"""`validate` on planted corruptions: each is caught and located by shard, row id and field."""

import json
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kame_data.audio import decode, wav_bytes
from kame_data.dataset.validate import DatasetInvalid, validate_dataset
from tests.conftest import CLI

pytestmark = pytest.mark.slow


@pytest.fixture
def bad(quickstart_out, tmp_path) -> Path:
    out = tmp_path / "bad"
    shutil.copytree(quickstart_out, out)
    return out


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def _save_manifest(out: Path, m: dict) -> None:
    (out / "manifest.json").write_text(json.dumps(m, indent=2))


def _shard(out: Path) -> tuple[str, Path]:
    name = _manifest(out)["shards"][0]["path"]
    return name, out / name


def _rewrite(out: Path, change) -> tuple[str, list[dict]]:
    """Apply `change(rows)` to the first shard's rows and write it back with the same schema."""
    name, path = _shard(out)
    table = pq.read_table(path)
    rows = table.to_pylist()
    change(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path, compression="zstd")
    return name, rows


def _invalid(out: Path) -> DatasetInvalid:
    with pytest.raises(DatasetInvalid) as e:
        validate_dataset(out)
    return e.value


def test_clean_dataset_passes(quickstart_out):
    report = validate_dataset(quickstart_out)
    assert report.rows == _manifest(quickstart_out)["counts"]["samples"] == 3
    assert report.events == _manifest(quickstart_out)["oracle_events"]


def test_unsorted_words(bad):
    def swap(rows):
        rows[1]["words"][3], rows[1]["words"][4] = rows[1]["words"][4], rows[1]["words"][3]
    name, rows = _rewrite(bad, swap)
    e = _invalid(bad)
    assert (e.shard, e.row, e.field) == (name, rows[1]["id"], "words[4].start")
    assert "time order" in e.message


def test_event_past_the_end(bad):
    def late(rows):
        rows[2]["oracle"][-1]["timestamp_ms"] = int(rows[2]["duration"] * 1000) + 5000
    name, rows = _rewrite(bad, late)
    e = _invalid(bad)
    assert (e.shard, e.row, e.field) == (name, rows[2]["id"], f"oracle[{len(rows[2]['oracle']) - 1}].timestamp_ms")


def test_mono_audio(bad):
    def mono(rows):
        pcm, sr = decode(rows[0]["audio"]["bytes"])
        rows[0]["audio"]["bytes"] = wav_bytes(pcm[:, 0], sr)
    name, rows = _rewrite(bad, mono)
    e = _invalid(bad)
    assert (e.shard, e.row, e.field) == (name, rows[0]["id"], "audio")
    assert "1 channel" in e.message


def test_wrong_rate(bad):
    def rate(rows):
        pcm, _ = decode(rows[1]["audio"]["bytes"])
        rows[1]["audio"]["bytes"] = wav_bytes(pcm, 16000)
    name, rows = _rewrite(bad, rate)
    e = _invalid(bad)
    assert (e.shard, e.row, e.field) == (name, rows[1]["id"], "audio")
    assert "16000 Hz" in e.message


def test_schema_violation(bad):
    def negative(rows):
        rows[2]["variant"] = -1
    name, rows = _rewrite(bad, negative)
    e = _invalid(bad)
    assert (e.shard, e.row, e.field) == (name, rows[2]["id"], "variant")


def test_bad_channel_is_a_schema_violation(bad):
    def channel(rows):
        rows[0]["oracle"][0]["channel"] = 2
    name, rows = _rewrite(bad, channel)
    e = _invalid(bad)
    assert (e.shard, e.row, e.field) == (name, rows[0]["id"], "oracle[0].channel")


def test_missing_shard(bad):
    name, path = _shard(bad)
    path.unlink()
    e = _invalid(bad)
    assert (e.shard, e.row, e.field) == (name, "", "") and "missing" in e.message


def test_truncated_shard(bad):
    name, path = _shard(bad)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    e = _invalid(bad)
    assert (e.shard, e.row, e.field) == (name, "", "") and "truncated" in e.message


def test_row_count_mismatch(bad):
    m = _manifest(bad)
    m["shards"][0]["rows"] += 1
    _save_manifest(bad, m)
    e = _invalid(bad)
    assert (e.shard, e.row, e.field) == (m["shards"][0]["path"], "", "rows")


def test_sample_count_mismatch(bad):
    m = _manifest(bad)
    m["counts"]["samples"] += 2
    _save_manifest(bad, m)
    e = _invalid(bad)
    assert (e.shard, e.row, e.field) == ("", "", "manifest.json:counts.samples")


def test_checksum_mismatch(bad):
    name, _ = _rewrite(bad, lambda rows: None)  # same rows, new bytes on disk
    e = _invalid(bad)
    assert (e.shard, e.row, e.field) == (name, "", "sha256")


def test_duplicate_row_id(bad):
    def dup(rows):
        rows[1]["id"] = rows[0]["id"]
    name, rows = _rewrite(bad, dup)
    e = _invalid(bad)
    assert (e.shard, e.row, e.field) == (name, rows[0]["id"], "id")


def test_item_in_two_splits(bad):
    """A second shard in another split that holds a variant of a train item: a leak."""
    name, path = _shard(bad)
    table = pq.read_table(path)
    row = table.to_pylist()[0]
    leaked = {**row, "id": row["id"] + "-leak", "variant": 1}
    leak_name = "data/test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist([leaked], schema=table.schema), bad / leak_name)
    m = _manifest(bad)
    m["shards"].append({"path": leak_name, "split": "test", "rows": 1})
    _save_manifest(bad, m)
    e = _invalid(bad)
    assert (e.shard, e.row, e.field) == (leak_name, leaked["id"], "item_id") and "leak" in e.message


def test_column_type_changed(bad):
    name, path = _shard(bad)
    table = pq.read_table(path)
    i = table.schema.get_field_index("duration")
    table = table.set_column(i, pa.field("duration", pa.float32()), table.column(i).cast(pa.float32()))
    pq.write_table(table, path)
    e = _invalid(bad)
    assert (e.shard, e.row, e.field) == (name, "", "duration")


def test_card_disagrees_with_shards(bad):
    text = (bad / "README.md").read_text()
    (bad / "README.md").write_text(text.replace("num_examples: 3", "num_examples: 4", 1))
    e = _invalid(bad)
    assert e.field == "README.md:dataset_info.splits"


def test_cli_names_the_violation(bad):
    def late(rows):
        rows[0]["oracle"][0]["timestamp_ms"] = 10**7
    name, rows = _rewrite(bad, late)
    r = subprocess.run(CLI + ["validate", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1
    assert name in r.stderr and rows[0]["id"] in r.stderr and "oracle[0].timestamp_ms" in r.stderr

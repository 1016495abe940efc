"""Exports: kame_finetune's canonical layout (docs/design.md) and moshi-finetune's, with safe file names."""

import io
import json
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import soundfile as sf

from kame_data.dataset.export import (
    ExportError,
    export_kame_finetune,
    export_moshi_finetune,
    kame_oracle_record,
    safe_stem,
)
from kame_data.dataset.shards import ShardWriter
from kame_data.records import ORACLE_REFERENCE_FIELDS, OracleEvent, Word
from tests.conftest import CLI
from tests.dataset.test_publish import make_row

WORD_FIELDS = ["speaker", "word", "start", "end"]


# ---- file names ----------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", ["a/b", "../../etc/passwd", "..", ".", "", "with space", ".hidden", "x\\y",
                                 "-rf", "a\x00b", "ü-id", "a" * 300, "a..b"])
def test_safe_stem_never_a_path(raw):
    stem = safe_stem(raw)
    assert stem and "/" not in stem and "\\" not in stem and ".." not in stem and " " not in stem
    assert not stem.startswith((".", "-")) and len(stem) <= 111
    assert Path(stem).name == stem


def test_safe_stem_keeps_plain_ids_and_separates_cleaned_ones():
    assert safe_stem("mmlu_pro-9001-v0") == "mmlu_pro-9001-v0"
    assert safe_stem("gsm8k-66979ea07a89-v0.1") == "gsm8k-66979ea07a89-v0.1"
    assert safe_stem("a/b") != safe_stem("a b") != safe_stem("a_b")
    assert safe_stem("a/b") == safe_stem("a/b")


def test_oracle_record_is_the_reference_record():
    e = OracleEvent(timestamp_ms=1000, conversation_context="B: what is two", prediction="it's four",
                    total_word_count=3, trigger_word="two", recent_words=["what", "is", "two"],
                    current_spoken_ratio=0.6, channel=0, hint="it's four", level=1)
    rec = kame_oracle_record(e.to_dict())
    assert list(rec) == list(ORACLE_REFERENCE_FIELDS) == list(e.reference_dict())
    assert rec["recent_words"] == "what is two"  # the reference generator joins them with spaces
    assert "level" not in rec


# ---- on a synthetic dataset with hostile ids -----------------------------------------------------

HOSTILE = ["../escape", "dir/sub id", "plain-id", "..", "a b/../c"]


@pytest.fixture
def hostile_out(tmp_path) -> Path:
    out = tmp_path / "out"
    w = ShardWriter(out, rows_per_shard=2)
    for i, rid in enumerate(HOSTILE):
        w.add(make_row(rid, f"item{i}"))
    shards = w.finish()
    (out / "manifest.json").write_text(json.dumps({"shards": shards}))
    return out


def _all_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_hostile_ids_stay_inside_dest(hostile_out, tmp_path):
    dest = tmp_path / "sandbox" / "kame"
    report = export_kame_finetune(hostile_out, dest)
    assert report.rows == len(HOSTILE)
    files = _all_files(tmp_path / "sandbox")
    assert all(dest in p.parents for p in files)
    for sub in ("audio", "text", "oracle_raw"):
        assert len(list((dest / sub).iterdir())) == len(HOSTILE)
    id_map = json.loads((dest / "id_map.json").read_text())
    assert set(id_map) == set(HOSTILE) - {"plain-id"}
    assert (dest / "audio" / "plain-id.wav").is_file()
    assert not (tmp_path / "escape.wav").exists() and not list(tmp_path.glob("*.json"))

    mdest = tmp_path / "sandbox" / "moshi"
    export_moshi_finetune(hostile_out, mdest)
    assert all(mdest in p.parents or dest in p.parents for p in _all_files(tmp_path / "sandbox"))
    index = [json.loads(x) for x in (mdest / "train.jsonl").read_text().splitlines()]
    assert all(Path(e["path"]).parent == Path("data_stereo") for e in index)


def test_unknown_split_is_refused(hostile_out, tmp_path):
    with pytest.raises(ExportError, match="no split 'test'"):
        export_kame_finetune(hostile_out, tmp_path / "x", split="test")


def test_mono_audio_is_refused(tmp_path):
    out = tmp_path / "out"
    row = make_row("r0")
    from kame_data.audio import decode, wav_bytes

    pcm, sr = decode(row["audio"]["bytes"])
    row["audio"]["bytes"] = wav_bytes(pcm[:, 0], sr)
    w = ShardWriter(out)
    w.add(row)
    (out / "manifest.json").write_text(json.dumps({"shards": w.finish()}))
    with pytest.raises(ExportError, match="stereo"):
        export_kame_finetune(out, tmp_path / "dest")


# ---- on the quickstart ---------------------------------------------------------------------------

def _rows(out: Path) -> list[dict]:
    return [r for p in sorted((out / "data").glob("*.parquet")) for r in pq.read_table(p).to_pylist()]


@pytest.mark.slow
def test_kame_finetune_layout(quickstart_out, tmp_path):
    """docs/design.md: audio/<id>.wav stereo; text/<id>.json [{speaker, word, start, end}] in time order with
    both speakers; oracle_raw/<id>.json the reference fields in the reference order."""
    dest = tmp_path / "kame"
    r = subprocess.run(CLI + ["export", "kame-finetune", str(quickstart_out), str(dest)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = _rows(quickstart_out)
    ids = sorted(row["id"] for row in rows)
    for sub, ext in (("audio", ".wav"), ("text", ".json"), ("oracle_raw", ".json")):
        assert sorted(p.name[: -len(ext)] for p in (dest / sub).iterdir()) == ids
    assert not [p for p in dest.rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]
    for row in rows:
        rid = row["id"]
        with sf.SoundFile(dest / "audio" / f"{rid}.wav") as f:
            assert f.channels == 2 and f.samplerate == 24000
        data, _ = sf.read(dest / "audio" / f"{rid}.wav", always_2d=True)
        ref, _ = sf.read(io.BytesIO(row["audio"]["bytes"]), always_2d=True)
        assert (data == ref).all()

        text = json.loads((dest / "text" / f"{rid}.json").read_text())
        assert all(list(w) == WORD_FIELDS for w in text)
        assert [(w["start"], w["end"]) for w in text] == sorted((w["start"], w["end"]) for w in text)
        assert {w["speaker"] for w in text} == {"A", "B"}
        assert text == [{k: w[k] for k in WORD_FIELDS} for w in row["words"]]

        oracle = json.loads((dest / "oracle_raw" / f"{rid}.json").read_text())
        assert len(oracle) == len(row["oracle"]) > 0
        for got, event in zip(oracle, row["oracle"]):
            assert list(got) == list(ORACLE_REFERENCE_FIELDS)
            assert got["recent_words"] == " ".join(event["recent_words"])
            assert {k: v for k, v in got.items() if k != "recent_words"} == \
                   {k: event[k] for k in ORACLE_REFERENCE_FIELDS if k != "recent_words"}
            assert 0 <= got["timestamp_ms"] <= row["duration"] * 1000
    # written the way the reference writes it: UTF-8 JSON, indent 2
    sample = (dest / "oracle_raw" / f"{ids[0]}.json").read_text("utf-8")
    assert sample.startswith("[\n  {\n    \"timestamp_ms\": ")


@pytest.mark.slow
def test_moshi_finetune_layout(quickstart_out, tmp_path):
    dest = tmp_path / "moshi"
    r = subprocess.run(CLI + ["export", "moshi-finetune", str(quickstart_out), str(dest)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = {row["id"]: row for row in _rows(quickstart_out)}
    index = [json.loads(x) for x in (dest / "train.jsonl").read_text().splitlines()]
    assert len(index) == len(rows)
    for entry in index:
        assert list(entry) == ["path", "duration"]
        wav = dest / entry["path"]
        info = sf.info(wav)
        assert info.channels == 2 and abs(info.duration - entry["duration"]) < 1e-6
        row = rows[wav.stem]
        align = json.loads(wav.with_suffix(".json").read_text())["alignments"]
        starts = [a[1][0] for a in align]
        assert starts == sorted(starts)
        assert all(isinstance(a[0], str) and len(a[1]) == 2 and a[1][0] <= a[1][1] for a in align)
        assert [a[0] for a in align if a[2] == "SPEAKER_MAIN"] == [w["word"] for w in row["words"] if w["speaker"] == "A"]
        assert {a[2] for a in align} == {"SPEAKER_MAIN", "SPEAKER_OTHER"}


@pytest.mark.slow
def test_kame_finetune_generator_input_gives_our_ladder(quickstart_out, tmp_path):
    """A kame_finetune user who runs its generator (tools/generate_oracle_from_text.py) with the
    arguments of oracle_generation.json gets oracle_raw/ back: an independent implementation of the
    reference rules (tests/oracle/test_ladder.py), run over text_floor/ in file order as that generator
    reads it, gives every event and field of oracle_raw/ but the prediction, less the events the
    export lists as dropped. Over text/ (which keeps the listener backchannels) it would not."""
    from tests.oracle.test_ladder import reference_ladder

    dest = tmp_path / "kame"
    r = subprocess.run(CLI + ["export", "kame-finetune", str(quickstart_out), str(dest)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    gen = json.loads((dest / "oracle_generation.json").read_text())
    assert gen["same_ladder"] and gen["args"]["text_dir"] == "text_floor" and gen["args"]["target_channel"] == 0
    args = gen["args"]
    rows = {row["id"]: row for row in _rows(quickstart_out)}
    with_backchannels = differs_over_text = 0
    for rid, row in rows.items():
        floor = json.loads((dest / "text_floor" / f"{rid}.json").read_text())
        assert all(list(w) == WORD_FIELDS for w in floor)
        assert [w["end"] for w in floor] == sorted(w["end"] for w in floor)  # file order is the ladder's order
        text = json.loads((dest / "text" / f"{rid}.json").read_text())
        with_backchannels += len(text) > len(floor)

        def ladder_of(words):
            ws = [Word(w["speaker"], w["word"], w["start"], w["end"]) for w in words]
            return [{k: (" ".join(v) if k == "recent_words" else v) for k, v in e.items() if k != "level"}
                    for e in reference_ladder(ws, args["time_interval"], target=args["target_channel"])
                    if e["timestamp_ms"] not in gen["dropped"].get(rid, [])]

        ours = [{k: v for k, v in e.items() if k != "prediction"}
                for e in json.loads((dest / "oracle_raw" / f"{rid}.json").read_text())]
        assert ladder_of(floor) == ours, rid
        differs_over_text += ladder_of(text) != ours
    assert with_backchannels and differs_over_text  # the quickstart has backchannels, and they matter

"""Exports the trainers consume untouched.

- kame_finetune (SakanaAI/kame_finetune): `audio/<id>.wav` (stereo, A left, B right),
  `text/<id>.json` (a list of {"speaker","word","start","end"} in time order, every word),
  `oracle_raw/<id>.json` (the reference oracle fields, in the reference order), and what its
  oracle generator needs to give that same ladder: `text_floor/<id>.json` (the floor words, in the
  order the ladder reads them) and `oracle_generation.json` (its settings). docs/conversation.md,
  "What enters the word stream, the oracle ladder and the exports".
- moshi-finetune (kyutai-labs/moshi-finetune): `data_stereo/<id>.wav` with a sibling `<id>.json`
  holding {"alignments": [[word, [start, end], speaker], ...]} and `<split>.jsonl` indexes of
  {"path", "duration"}.

Row ids are data, not paths: every file name goes through `safe_stem`. Every file is written
atomically, so an interrupted export leaves whole files only.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pyarrow.parquet as pq
import soundfile as sf

from kame_data.atomic import write_bytes, write_json, write_jsonl, write_text
from kame_data.dataset.folder import DatasetDir, DatasetError
from kame_data.dataset.rows import ARRIVAL_COLUMN
from kame_data.oracle.ladder import floor_words
from kame_data.records import CHANNEL, ORACLE_REFERENCE_FIELDS, Word

log = logging.getLogger("kame_data.dataset.export")

MAX_STEM = 100
MOSHI_SPEAKERS = {"A": "SPEAKER_MAIN", "B": "SPEAKER_OTHER"}  # moshi-finetune trains the main speaker's text
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class ExportError(DatasetError):
    """The dataset cannot be exported as asked; the message names the row or file."""


@dataclass
class ExportReport:
    dest: Path
    rows: int
    renamed: dict[str, str]  # row id -> file stem, for ids that could not be used as they are
    splits: dict[str, int]


def safe_stem(row_id: str) -> str:
    """A file stem for a row id: the id itself when it is a plain name, else a cleaned form plus a
    short hash of the id (so two ids that clean to the same text still get different files).
    Never empty, never starting with a dot, never containing a separator or `..`."""
    cleaned = _UNSAFE.sub("_", row_id)
    cleaned = re.sub(r"\.{2,}", "_", cleaned).strip("._-")[:MAX_STEM]
    if cleaned == row_id and cleaned:
        return cleaned
    digest = hashlib.sha256(row_id.encode("utf-8")).hexdigest()[:10]
    return f"{cleaned or 'row'}-{digest}"


def _open(out_dir: str | Path) -> DatasetDir:
    """The dataset, its shards checked against their checksums before a file is written."""
    ds = DatasetDir.open(out_dir)
    ds.verify_checksums()
    return ds


def iter_rows(ds: DatasetDir, split: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(split, row) for every row of the dataset (of `split`), shard by shard, a few rows at a time."""
    if split is not None and split not in ds.splits:
        raise ExportError(f"no split {split!r} in {ds.root} (it has: {', '.join(ds.splits)})")
    for shard in ds.shards(split):
        for row in ds.shard_rows(shard):
            yield shard.split, row


def _stereo_wav(row: dict[str, Any]) -> tuple[bytes, float]:
    """The row's WAV bytes, checked to be stereo, and their exact duration in seconds."""
    data = (row.get("audio") or {}).get("bytes")
    if not data:
        raise ExportError(f"row {row.get('id')}: no audio bytes")
    try:
        info = sf.info(io.BytesIO(data))
    except Exception as e:  # soundfile raises several types for undecodable bytes
        raise ExportError(f"row {row['id']}: audio does not decode: {e}") from e
    if info.channels != 2:
        raise ExportError(f"row {row['id']}: {info.channels} channel(s), the trainers need stereo (A left, B right)")
    return data, info.frames / info.samplerate


def _words_in_time_order(row: dict[str, Any]) -> list[dict[str, Any]]:
    words = sorted(row["words"], key=lambda w: (w["start"], w["end"]))
    speakers = {w["speaker"] for w in words}
    if speakers != {"A", "B"}:
        raise ExportError(f"row {row['id']}: words of both speakers A and B are needed, found {sorted(speakers)}")
    return words


def floor_transcript(row: dict[str, Any]) -> list[dict[str, Any]]:
    """`text_floor/<id>.json`: the words the ladder reads (no listener backchannels; docs/design.md,
    "Floor words") in the order it reads them, by end time (ties in the row's order). kame_finetune's
    generator takes a transcript in file order, so this order makes it read what the ladder read even
    where words overlap (a barge-in ends before the turn it cuts into)."""
    words = [Word(w["speaker"], w["word"], w["start"], w["end"], bool(w.get("backchannel"))) for w in row["words"]]
    return [{"speaker": w.speaker, "word": w.word, "start": w.start, "end": w.end}
            for w in sorted(floor_words(words), key=lambda w: w.end)]


def dropped_events(ds: DatasetDir) -> dict[str, list[int]]:
    """Row id -> timestamps of the ladder events the oracle step dropped for want of a reply
    (`empty_prediction` rejects, named `id@timestamp_ms`)."""
    out: dict[str, list[int]] = {}
    for r in ds.rejects():
        if r.get("stage") == "oracle" and r.get("reason") == "empty_prediction" and "@" in str(r.get("id")):
            rid, ts = str(r["id"]).rsplit("@", 1)
            if ts.isdigit():
                out.setdefault(rid, []).append(int(ts))
    return {k: sorted(v) for k, v in out.items()}


def oracle_generation(ds: DatasetDir, dropped: dict[str, list[int]]) -> dict[str, Any]:
    """`oracle_generation.json`: the arguments of kame_finetune's `tools/generate_oracle_from_text.py`
    that give `oracle_raw/` again from `text_floor/` (up to the predictions; docs/guides/exporting.md),
    and per file the events kame-data dropped for want of a reply (`dropped`: file stem -> timestamps)."""
    oracle = ((ds.manifest or {}).get("recipe") or {}).get("oracle") or {}
    target = {"assistant": CHANNEL["A"], "user": CHANNEL["B"]}.get(oracle.get("target", "assistant"))
    args = {"text_dir": "text_floor", "time_interval": oracle.get("interval", 0.5), "target_channel": target,
            "A_channel": CHANNEL["A"], "B_channel": CHANNEL["B"]}
    same = oracle.get("trigger", "every_step") == "every_step"
    return {"generator": "kame_finetune tools/generate_oracle_from_text.py", "args": args,
            "same_ladder": same,
            "note": "the same events and fields as oracle_raw/, predictions aside, less events kame-data dropped "
                    "for want of a reply" if same else
                    "this dataset fired events only when new words arrived (oracle.trigger: new_words); the "
                    "reference generator fires every step, so its ladder has more events",
            "dropped": dropped}


def kame_oracle_record(event: dict[str, Any]) -> dict[str, Any]:
    """One `oracle_raw` record: the reference fields only, in the reference order.

    The reference generator writes `recent_words` as the words joined by spaces; kame-data keeps
    them as a list, so they are joined here.
    """
    rec = {k: event[k] for k in ORACLE_REFERENCE_FIELDS}
    if isinstance(rec["recent_words"], list):
        rec["recent_words"] = " ".join(rec["recent_words"])
    return rec


class _Stems:
    """Hands out file stems, refusing two rows the same file."""

    def __init__(self) -> None:
        self.used: dict[str, str] = {}
        self.renamed: dict[str, str] = {}

    def __call__(self, row_id: str) -> str:
        stem = safe_stem(row_id)
        if stem in self.used:
            raise ExportError(f"rows {self.used[stem]!r} and {row_id!r} would share the file name {stem!r}")
        self.used[stem] = row_id
        if stem != row_id:
            self.renamed[row_id] = stem
        return stem


def _split_dirs(ds: DatasetDir, dest: Path, split: str | None) -> dict[str, Path]:
    """One split (or a one-split dataset) goes to DEST itself; several go to DEST/<split>/ each,
    so validation and test rows never land in a training folder."""
    names = ds.splits
    if split is not None:
        return {split: dest}
    if len(names) == 1:
        return {names[0]: dest}
    return {n: dest / n for n in names}


def arrival_records(row: dict[str, Any]) -> list[dict[str, Any]]:
    """`oracle_raw` records timed by arrival (docs/design.md, "Oracle arrival"): each event that
    played, at the time its first chunk reached the front-end, with its ladder time beside it as
    `ideal_timestamp_ms`; events the server never asked, or whose reply was cut before it began,
    are left out (a front-end never saw them)."""
    out = []
    for e, a in zip(row["oracle"], row.get(ARRIVAL_COLUMN) or []):
        if a["frame"] is None or not a["piece_ms"]:
            continue
        rec = kame_oracle_record(e)
        rec["timestamp_ms"] = int(a["piece_ms"][0])
        rec["ideal_timestamp_ms"] = int(e["timestamp_ms"])
        out.append(rec)
    return out


def _timing_readme(timing: str, latency: Any) -> str:
    if timing == "ideal":
        return ("# kame_finetune export\n\nOracle timing: **ideal**. Each `oracle_raw` event's `timestamp_ms` is its "
                "ladder time: the instant its partial transcript exists, as kame_finetune's "
                "tools/oracle_generation.py places events.\n")
    return ("# kame_finetune export\n\nOracle timing: **arrival**, under the latency model "
            f"`{json.dumps(latency)}` (the recipe's oracle.latency). Each `oracle_raw` event's `timestamp_ms` is "
            "when its reply's first chunk reached the front-end, so kame_finetune's tokenize_oracle starts it there "
            "without a change on its side; `ideal_timestamp_ms` keeps the ladder time. Events never asked or cut "
            "before their first chunk are left out. The served stream's late pieces (a reply slower than one "
            "token per frame) cannot be written in this layout: kame-data's trainer replays them "
            "(`oracle.timing: served`).\n")


def export_kame_finetune(out_dir: str | Path, dest: str | Path, split: str | None = None,
                         timing: str = "auto") -> ExportReport:
    """Write the kame_finetune layout (audio/, text/, oracle_raw/, text_floor/ and
    oracle_generation.json, plus a README.md saying which oracle timing) for one split or every split.
    `timing`: ideal (ladder times), arrival (first-chunk times under the recipe's latency model), auto
    (arrival when the rows carry it)."""
    ds, dest = _open(out_dir), Path(dest)
    has_arrival = any(ARRIVAL_COLUMN in pq.read_schema(sh.path).names for sh in ds.shards())
    if timing not in ("auto", "ideal", "arrival"):
        raise ExportError(f"--timing must be auto, ideal or arrival, not {timing!r}")
    if timing == "arrival" and not has_arrival:
        raise ExportError(f"{ds.root}: the rows carry no oracle arrival times (the recipe's oracle.latency is ideal); "
                          "rerun with a latency model, or export --timing ideal")
    timing = ("arrival" if has_arrival else "ideal") if timing == "auto" else timing
    latency = ((ds.manifest.get("recipe") or {}).get("oracle") or {}).get("latency", "ideal")
    dirs = _split_dirs(ds, dest, split)
    stems = {s: _Stems() for s in dirs}
    counts: dict[str, int] = {}
    dropped = dropped_events(ds)
    dropped_by_stem: dict[str, dict[str, list[int]]] = {s: {} for s in dirs}
    for sp, row in iter_rows(ds, split):
        base = dirs[sp]
        stem = stems[sp](row["id"])
        if row["id"] in dropped:
            dropped_by_stem[sp][stem] = dropped[row["id"]]
        wav, _ = _stereo_wav(row)
        write_bytes(base / "audio" / f"{stem}.wav", wav)
        write_json(base / "text" / f"{stem}.json",
                   [{"speaker": w["speaker"], "word": w["word"], "start": w["start"], "end": w["end"]}
                    for w in _words_in_time_order(row)])
        write_json(base / "oracle_raw" / f"{stem}.json", arrival_records(row) if timing == "arrival"
                   else [kame_oracle_record(e) for e in row["oracle"]])
        write_json(base / "text_floor" / f"{stem}.json", floor_transcript(row))
        counts[sp] = counts.get(sp, 0) + 1
    renamed = {k: v for s in stems.values() for k, v in s.renamed.items()}
    for sp, base in dirs.items():
        if sp in counts:
            write_json(base / "oracle_generation.json", oracle_generation(ds, dropped_by_stem[sp]))
            write_text(base / "README.md", _timing_readme(timing, latency))
        if stems[sp].renamed:
            write_json(base / "id_map.json", stems[sp].renamed)
    log.info("kame-finetune export: %d rows to %s (%d ids renamed)", sum(counts.values()), dest, len(renamed))
    return ExportReport(dest=dest, rows=sum(counts.values()), renamed=renamed, splits=counts)


def moshi_alignments(row: dict[str, Any]) -> dict[str, Any]:
    """moshi-finetune's transcript: [word, [start, end], speaker] sorted by start; the assistant
    (A, left channel) is SPEAKER_MAIN, the only speaker whose text moshi-finetune trains on."""
    return {"alignments": [[w["word"], [w["start"], w["end"]], MOSHI_SPEAKERS[w["speaker"]]]
                           for w in _words_in_time_order(row)]}


def export_moshi_finetune(out_dir: str | Path, dest: str | Path, split: str | None = None,
                          absolute_paths: bool = False) -> ExportReport:
    """Write DEST/data_stereo/<id>.wav + <id>.json and DEST/<split>.jsonl ({"path","duration"}).

    Paths in the index are relative to DEST unless `absolute_paths` (moshi-finetune opens them
    from its working directory, so absolute paths avoid depending on where training starts).
    """
    ds, dest = _open(out_dir), Path(dest)
    stems = _Stems()
    index: dict[str, list[dict[str, Any]]] = {}
    for sp, row in iter_rows(ds, split):
        stem = stems(row["id"])
        wav, duration = _stereo_wav(row)
        wav_path = dest / "data_stereo" / f"{stem}.wav"
        write_bytes(wav_path, wav)
        write_text(wav_path.with_suffix(".json"), json.dumps(moshi_alignments(row), ensure_ascii=False))
        shown = str(wav_path.resolve()) if absolute_paths else f"data_stereo/{stem}.wav"
        index.setdefault(sp, []).append({"path": shown, "duration": duration})
    for sp, entries in index.items():
        write_jsonl(dest / f"{sp}.jsonl", entries)
    if stems.renamed:
        write_json(dest / "id_map.json", stems.renamed)
    rows = sum(len(v) for v in index.values())
    log.info("moshi-finetune export: %d rows to %s", rows, dest)
    return ExportReport(dest=dest, rows=rows, renamed=stems.renamed, splits={k: len(v) for k, v in index.items()})


EXPORTERS = {"kame-finetune": export_kame_finetune, "moshi-finetune": export_moshi_finetune}

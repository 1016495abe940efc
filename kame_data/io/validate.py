"""`kame-data validate`: schema checks plus cross-checks between rows, audio and manifest.

The first violation is reported with its shard, row id and field, so it can be found and fixed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pyarrow.parquet as pq

from kame_data.io.audio import decode
from kame_data.io.dataset import SAMPLE_RATE, row_metadata
from kame_data.oracle.ladder import hint_level
from kame_data.schema import SchemaError, validate

TOLERANCE = 0.011  # seconds; timings are rounded to 0.1 ms, durations to frames


class DatasetInvalid(ValueError):
    def __init__(self, shard: str, row: str, field: str, message: str):
        self.shard, self.row, self.field, self.message = shard, row, field, message
        where = ", ".join(x for x in (f"shard {shard}" if shard else "", f"row {row}" if row else "",
                                       f"field {field}" if field else "") if x)
        super().__init__(f"{where}: {message}" if where else message)


@dataclass
class Report:
    shards: int
    rows: int
    events: int


def _check_row(row: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(field, message) for each problem in one row, most basic first."""
    try:
        validate("sample", row_metadata(row))
    except SchemaError as e:
        yield e.path, e.message
        return
    audio = row.get("audio") or {}
    try:
        pcm, sr = decode(audio["bytes"])
    except Exception as e:  # soundfile raises several types for undecodable bytes
        yield "audio", f"audio does not decode: {e}"
        return
    if sr != SAMPLE_RATE:
        yield "audio", f"sample rate {sr} Hz, expected {SAMPLE_RATE}"
    if pcm.shape[1] != 2:
        yield "audio", f"{pcm.shape[1]} channel(s), expected 2 (A left, B right)"
    duration = len(pcm) / sr
    if abs(duration - row["duration"]) > TOLERANCE:
        yield "duration", f"{row['duration']} s but the audio lasts {duration:.3f} s"
    words = row["words"]
    for i, w in enumerate(words):
        if w["end"] < w["start"]:
            yield f"words[{i}].end", f"ends ({w['end']}) before it starts ({w['start']})"
        if w["end"] > duration + TOLERANCE:
            yield f"words[{i}].end", f"{w['end']} s is past the end of the audio ({duration:.3f} s)"
        if i and (w["start"], w["end"]) < (words[i - 1]["start"], words[i - 1]["end"]):
            yield f"words[{i}].start", f"words are not in time order ({words[i - 1]['start']} then {w['start']})"
    speakers = {w["speaker"] for w in words}
    if speakers != {"A", "B"}:
        yield "words", f"words of both speakers expected, found {sorted(speakers)}"
    for i, e in enumerate(row["oracle"]):
        if e["timestamp_ms"] > duration * 1000 + TOLERANCE * 1000:
            yield f"oracle[{i}].timestamp_ms", f"{e['timestamp_ms']} ms is past the end of the audio"
        if i and e["timestamp_ms"] <= row["oracle"][i - 1]["timestamp_ms"]:
            yield f"oracle[{i}].timestamp_ms", "events are not in time order"
        if e["level"] != hint_level(e["current_spoken_ratio"]):
            yield f"oracle[{i}].level", f"level {e['level']} does not follow ratio {e['current_spoken_ratio']}"
        if bool(e["hint"]) != (e["current_spoken_ratio"] > 0.5):
            yield f"oracle[{i}].hint", "hint must be present exactly when the spoken ratio is above 0.5"


def validate_dataset(out_dir: str | Path) -> Report:
    """Raise DatasetInvalid at the first problem; return counts when everything holds."""
    out = Path(out_dir)
    mpath = out / "manifest.json"
    if not mpath.is_file():
        raise DatasetInvalid("", "", "manifest.json", f"{mpath} is missing: is this a kame-data output folder?")
    try:
        manifest = json.loads(mpath.read_text("utf-8"))
        validate("manifest", manifest)
    except (json.JSONDecodeError, SchemaError) as e:
        raise DatasetInvalid("", "", "manifest.json", str(e)) from e
    listed = {s["path"] for s in manifest["shards"]}
    present = {f"data/{p.name}" for p in (out / "data").glob("*.parquet")}
    for extra in sorted(present - listed):
        raise DatasetInvalid(extra, "", "", "shard is not listed in manifest.json")
    rows_total = events = 0
    seen: set[str] = set()
    for shard in manifest["shards"]:
        path = out / shard["path"]
        if not path.is_file():
            raise DatasetInvalid(shard["path"], "", "", "shard listed in manifest.json is missing")
        try:
            table = pq.read_table(path)
        except Exception as e:  # pyarrow raises ArrowInvalid / OSError for damaged files
            raise DatasetInvalid(shard["path"], "", "", f"not a readable Parquet file: {e}") from e
        if table.num_rows != shard["rows"]:
            raise DatasetInvalid(shard["path"], "", "", f"{table.num_rows} rows, manifest says {shard['rows']}")
        for row in table.to_pylist():
            rid = str(row.get("id"))
            if rid in seen:
                raise DatasetInvalid(shard["path"], rid, "id", "duplicate row id")
            seen.add(rid)
            for field, message in _check_row(row):
                raise DatasetInvalid(shard["path"], rid, field, message)
            events += len(row["oracle"])
        rows_total += table.num_rows
    if rows_total != manifest["counts"].get("samples", rows_total):
        raise DatasetInvalid("", "", "manifest.json", f"{rows_total} rows in shards, manifest counts {manifest['counts']['samples']}")
    return Report(shards=len(manifest["shards"]), rows=rows_total, events=events)

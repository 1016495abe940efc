"""`kame-data validate`: schema checks plus cross-checks between rows, audio, manifest and card.

The first violation is reported with its shard, row id and field, so it can be found and fixed.
Checks run from the most basic (is the file there, is it Parquet) to the most specific (does an
oracle event's level follow its ratio), so a damaged file is named as damaged rather than as a
cascade of row errors; the shard checksum is checked last for the same reason.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pyarrow.parquet as pq
import yaml

from kame_data.audio import decode
from kame_data.dataset.folder import DatasetDir, DatasetError, Shard
from kame_data.dataset.owner import identity_mismatch
from kame_data.dataset.rows import ARRIVAL_COLUMN, SAMPLE_RATE, arrow_schema, row_metadata
from kame_data.dataset.shards import (
    PublishConfigError,
    sha256_file,
    split_fractions,
    split_of,
)
from kame_data.dataset.stats import RowStats, early_events
from kame_data.oracle.ladder import hint_level
from kame_data.recipe import safe_yaml
from kame_data.schema import SchemaError, validate

log = logging.getLogger("kame_data.dataset.validate")

TOLERANCE = 0.011  # seconds; timings are rounded to 0.1 ms, durations to frames


class DatasetInvalid(DatasetError):
    """The first violation found, located by shard, row id and field."""

    def __init__(self, shard: str, row: str, field: str, message: str):
        where = ", ".join(x for x in (f"shard {shard}" if shard else "", f"row {row}" if row else "",
                                       f"field {field}" if field else "") if x)
        super().__init__(f"{where}: {message}" if where else message, field)
        self.shard, self.row, self.message = shard, row, message


@dataclass
class Report:
    shards: int
    rows: int
    events: int
    splits: dict[str, int] | None = None
    early_truth_events: int = 0  # level-5 events inside a turn of the speaker heard (only with early_truth: keep)


def _check_audio(row: dict[str, Any]) -> Iterator[tuple[str, str]]:
    audio = row.get("audio") or {}
    if not audio.get("bytes"):
        yield "audio", "no audio bytes"
        return
    try:
        pcm, sr = decode(audio["bytes"])
    except Exception as e:  # soundfile raises several types for undecodable bytes
        yield "audio", f"audio does not decode: {e}"
        return
    if sr != SAMPLE_RATE or sr != row["sample_rate"]:
        yield "audio", f"sample rate {sr} Hz, declared {row['sample_rate']} Hz, expected {SAMPLE_RATE}"
    if pcm.shape[1] != 2:
        yield "audio", f"{pcm.shape[1]} channel(s), expected 2 (A left, B right)"
    duration = len(pcm) / sr
    if abs(duration - row["duration"]) > TOLERANCE:
        yield "duration", f"{row['duration']} s but the audio lasts {duration:.3f} s"


def _check_early(row: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Level-5 events (the true reply itself) before the speaker heard has finished the turn."""
    for i, k in early_events(row):
        e, turn = row["oracle"][i], row["turns"][k]
        yield (f"oracle[{i}].level",
               f"level-5 event at {e['timestamp_ms'] / 1000:.2f} s inside {turn['role']} turn {k} "
               f"({turn['start']:.2f}-{turn['end']:.2f} s, ratio {e['current_spoken_ratio']:.3f}): the true reply "
               f"before the {turn['role']} has finished "
               "(a recipe with long pauses sets oracle.early_truth: keep)")


def _check_row(row: dict[str, Any], check_audio: bool = True, allow_early: bool = False) -> Iterator[tuple[str, str]]:
    """(field, message) for each problem in one row, most basic first."""
    try:
        validate("sample", row_metadata(row))
    except SchemaError as e:
        yield e.path, e.message
        return
    if check_audio:
        problems = list(_check_audio(row))
        yield from problems
        if problems:
            return
    duration = row["duration"]
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
    for i, t in enumerate(row["turns"]):
        if t["end"] < t["start"]:
            yield f"turns[{i}].end", f"ends ({t['end']}) before it starts ({t['start']})"
        if t["end"] > duration + TOLERANCE:
            yield f"turns[{i}].end", f"{t['end']} s is past the end of the audio ({duration:.3f} s)"
    for i, e in enumerate(row["oracle"]):
        if e["timestamp_ms"] > duration * 1000 + TOLERANCE * 1000:
            yield f"oracle[{i}].timestamp_ms", f"{e['timestamp_ms']} ms is past the end of the audio ({duration:.3f} s)"
        if i and e["timestamp_ms"] <= row["oracle"][i - 1]["timestamp_ms"]:
            yield f"oracle[{i}].timestamp_ms", "events are not in time order"
        if e["total_word_count"] > len(words):
            yield f"oracle[{i}].total_word_count", f"{e['total_word_count']} words, the dialogue has {len(words)}"
        if e["recent_words"] and e["trigger_word"] != e["recent_words"][-1]:
            yield f"oracle[{i}].trigger_word", "is not the last of recent_words"
        if e["level"] != hint_level(e["current_spoken_ratio"]):
            yield f"oracle[{i}].level", f"level {e['level']} does not follow ratio {e['current_spoken_ratio']}"
        if bool(e["hint"]) != (e["current_spoken_ratio"] > 0.5):
            yield f"oracle[{i}].hint", "hint must be present exactly when the spoken ratio is above 0.5"
    if not allow_early:
        yield from _check_early(row)


def _open(out: Path) -> DatasetDir:
    """The manifest, its shard entries and its agreement with the folder's other records."""
    try:
        ds = DatasetDir.open(out, check_schema=True)
        ds.shards()
    except DatasetError as e:
        raise DatasetInvalid("", "", e.field, e.message) from e
    mixed = identity_mismatch(out, ds.manifest)
    if mixed:
        raise DatasetInvalid("", "", "recipe_name", mixed)
    return ds


def _check_columns(shard: str, pf: pq.ParquetFile) -> None:
    """The shard's columns and Hugging Face features are the published layout's."""
    got = pf.schema_arrow
    want = arrow_schema(ARRIVAL_COLUMN in got.names)  # a latency model's arrival column, or none
    for f in want:
        if f.name not in got.names:
            raise DatasetInvalid(shard, "", f.name, "column is missing")
        if not got.field(f.name).type.equals(f.type):
            raise DatasetInvalid(shard, "", f.name, f"column type {got.field(f.name).type}, expected {f.type}")
    for name in got.names:
        if name not in want.names:
            raise DatasetInvalid(shard, "", name, "unexpected column")
    meta = got.metadata or {}
    try:
        feats = json.loads(meta[b"huggingface"])["info"]["features"]
    except (KeyError, ValueError, TypeError):
        raise DatasetInvalid(shard, "", "huggingface", "no Hugging Face features in the Parquet schema metadata") from None
    if feats.get("audio", {}).get("_type") != "Audio" or feats["audio"].get("sampling_rate") != SAMPLE_RATE:
        raise DatasetInvalid(shard, "", "huggingface", f"audio feature is {feats.get('audio')}, expected Audio at {SAMPLE_RATE} Hz")


def _check_card(out: Path, manifest: dict[str, Any], per_split: Counter) -> None:
    """README.md's YAML header parses and points `load_dataset` at exactly the shards there are."""
    path = out / "README.md"
    if not path.is_file():
        raise DatasetInvalid("", "", "README.md", "the dataset card is missing")
    text = path.read_text("utf-8")
    parts = text.split("---\n", 2)
    if not text.startswith("---\n") or len(parts) < 3:
        raise DatasetInvalid("", "", "README.md", "no YAML header between --- lines")
    try:
        header = safe_yaml(parts[1]) or {}
    except yaml.YAMLError as e:
        raise DatasetInvalid("", "", "README.md", f"YAML header does not parse: {e}") from e
    configs = header.get("configs") or []
    files = {d["split"]: d["path"] for c in configs for d in c.get("data_files", []) if isinstance(d, dict)}
    if set(files) != set(per_split):
        raise DatasetInvalid("", "", "README.md:configs", f"splits {sorted(files)}, the shards have {sorted(per_split)}")
    info = {s["name"]: s.get("num_examples") for s in (header.get("dataset_info") or {}).get("splits", [])}
    for split, n in per_split.items():
        if info.get(split, n) != n:
            raise DatasetInvalid("", "", "README.md:dataset_info.splits",
                                 f"{split} has {info[split]} examples in the card, {n} in the shards")


class _CrossChecks:
    """What no single row shows: duplicate ids, items in two splits, items off their hashed split;
    and the figures the manifest states, counted as the rows go by."""

    def __init__(self, manifest: dict[str, Any], check_audio: bool):
        recipe = manifest["recipe"] if isinstance(manifest["recipe"], dict) else {}
        publish = recipe.get("publish", {})
        try:
            self.fractions = split_fractions(publish) if publish.get("splits") else None
        except PublishConfigError as e:
            raise DatasetInvalid("", "", "manifest.json:recipe.publish", str(e)) from e
        self.seed = recipe.get("seed", 0)
        self.check_audio = check_audio
        self.allow_early = (recipe.get("oracle") or {}).get("early_truth") == "keep"
        self.seen: set[str] = set()
        self.excluded = set((manifest.get("review") or {}).get("excluded", []))
        self.item_split: dict[str, tuple[str, str]] = {}
        self.stats = RowStats(f1=False)

    def row(self, name: str, split: str, row: dict[str, Any]) -> None:
        rid = str(row.get("id"))
        if rid in self.seen:
            raise DatasetInvalid(name, rid, "id", "duplicate row id")
        self.seen.add(rid)
        if rid in self.excluded:
            raise DatasetInvalid(name, rid, "id", "row was excluded in review (manifest.json review.excluded) "
                                 "but is in the shards")
        for field, message in _check_row(row, self.check_audio, self.allow_early):
            raise DatasetInvalid(name, rid, field, message)
        item = row["item_id"]
        first = self.item_split.setdefault(item, (split, rid))
        if first[0] != split:
            raise DatasetInvalid(name, rid, "item_id",
                                 f"item {item} is in {split} and in {first[0]} (row {first[1]}): splits leak")
        if self.fractions and split_of(item, self.seed, self.fractions) != split:
            raise DatasetInvalid(name, rid, "item_id", f"item {item} hashes to split "
                                 f"{split_of(item, self.seed, self.fractions)}, found in {split}")
        self.stats.add_row(row, split)


def _check_shard(ds: DatasetDir, shard: Shard, checks: _CrossChecks) -> None:
    """The file, its columns, its row count, every row, then its checksum."""
    name, split = shard.name, shard.split
    if not Path(name).name.startswith(f"{split}-"):
        raise DatasetInvalid(name, "", "split", f"shard of split {split!r} is not named {split}-*.parquet")
    if not shard.path.is_file():
        raise DatasetInvalid(name, "", "", "shard listed in manifest.json is missing")
    try:
        pf = ds.parquet(shard)
    except Exception as e:  # pyarrow raises ArrowInvalid / OSError for damaged files
        raise DatasetInvalid(name, "", "", f"not a readable Parquet file (truncated or damaged): {e}") from e
    _check_columns(name, pf)
    if pf.metadata.num_rows != shard.rows:
        raise DatasetInvalid(name, "", "rows", f"{pf.metadata.num_rows} rows, manifest says {shard.rows}")
    try:
        for row in ds.shard_rows(shard):
            checks.row(name, split, row)
    except DatasetInvalid:
        raise
    except Exception as e:  # a damaged page surfaces only when read
        raise DatasetInvalid(name, "", "", f"Parquet data does not read (truncated or damaged): {e}") from e
    if shard.sha256 and sha256_file(shard.path) != shard.sha256:
        raise DatasetInvalid(name, "", "sha256", "file checksum differs from manifest.json (modified after the run?)")


def _check_figures(manifest: dict[str, Any], stats: RowStats) -> None:
    """The manifest's counts and statistics are those of the rows."""
    if stats.samples != manifest["counts"].get("samples", stats.samples):
        raise DatasetInvalid("", "", "manifest.json:counts.samples",
                             f"{stats.samples} rows in shards, manifest counts {manifest['counts']['samples']}")
    counted = stats.manifest_fields()
    for key in ("per_source", "oracle_events", "levels", "early_truth_events", "oracle_arrival"):
        if key in manifest and counted.get(key) != manifest[key]:
            raise DatasetInvalid("", "", f"manifest.json:{key}", f"shards have {counted[key]}, "
                                 f"manifest says {manifest[key]}")


def validate_dataset(out_dir: str | Path, check_audio: bool = True) -> Report:
    """Raise DatasetInvalid at the first problem; return counts when everything holds."""
    out = Path(out_dir)
    ds = _open(out)
    for extra in ds.stray_shards():
        raise DatasetInvalid(extra, "", "", "shard is not listed in manifest.json")
    checks = _CrossChecks(ds.manifest, check_audio)
    shards = ds.shards()
    for shard in shards:
        _check_shard(ds, shard, checks)
    stats = checks.stats
    _check_figures(ds.manifest, stats)
    per_split = Counter({split: g.dialogues for split, g in stats.per_split.items()})
    _check_card(out, ds.manifest, per_split)
    log.info("valid: %s (%d rows, %d shards, %d events)", out, stats.samples, len(shards), stats.events)
    return Report(shards=len(shards), rows=stats.samples, events=stats.events, splits=dict(per_split),
                  early_truth_events=stats.early_truth)

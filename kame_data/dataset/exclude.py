"""`kame-data publish --exclude FLAGS`: the dataset again, without the rows a reviewer flagged.

Shards that hold a flagged row are rewritten, the others kept (in place) or copied byte for
byte, all through the shard writer's staging, naming and stale-shard cleanup, so the result is
laid out exactly as a run would lay it out. rejects.jsonl, the card and the manifest (shard
rows, bytes and sha256, counts, statistics) follow, the manifest last, so that `kame-data
validate` holds afterwards. Excluded rows become `flagged_in_review` rejects: nothing
disappears without a record.

The exclusions are part of the dataset's state: OUT/exclusions.jsonl keeps them (id and note), and
`kame-data run` into the folder keeps those rows out and their rejects in. The folder's lock is
held throughout, so no run writes it meanwhile.
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kame_data.atomic import write_json, write_jsonl, write_text
from kame_data.dataset.card import write_card
from kame_data.dataset.folder import EXCLUSIONS, MANIFEST, REJECTS, DatasetDir, DatasetError, Shard
from kame_data.dataset.owner import IDENTITY, LOCK, FolderLock
from kame_data.dataset.rows import ARRIVAL_COLUMN
from kame_data.dataset.shards import (
    ROW_GROUP_ROWS,
    STAGING,
    ShardFile,
    StagedShard,
    describe_shards,
    fresh_staging,
    install_shards,
)
from kame_data.records import Reject
from kame_data.schema import validate

log = logging.getLogger(__name__)

REASON = "flagged_in_review"
_COPIED = ("run.log", IDENTITY)  # other top-level files a copy (--to) keeps as they are


def read_exclusions(out: str | Path) -> dict[str, str]:
    """OUT/exclusions.jsonl: excluded row id -> the reviewer's note ({} when there is none)."""
    path = Path(out) / EXCLUSIONS
    if not path.is_file():
        return {}
    notes: dict[str, str] = {}
    for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        try:
            entry = json.loads(line) if line.strip() else None
        except json.JSONDecodeError:
            entry = False
        if entry is None:
            continue
        if not (isinstance(entry, dict) and isinstance(entry.get("id"), str) and isinstance(entry.get("note", ""), str)):
            raise DatasetError(f"{path} line {n} is not {{\"id\": ..., \"note\": ...}}: fix or delete that line "
                               "(deleting it lets that row back into the dataset on the next run)", EXCLUSIONS)
        notes[entry["id"]] = entry.get("note", "")
    return notes


def review_rejects(notes: dict[str, str]) -> list[Reject]:
    """The `flagged_in_review` reject of each excluded row, with the reviewer's note."""
    return [Reject("review", rid, REASON, note or "flagged by a reviewer") for rid, note in notes.items()]


@dataclass
class Exclusion:
    dest: Path
    kept: int
    excluded: list[str]
    unknown: list[str]  # flagged ids that are not in the dataset
    shards: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class _Plan:
    shard: Shard
    hits: list[str]  # flagged ids in this shard
    kept: int


def _plan(ds: DatasetDir, flagged: set[str]) -> list[_Plan]:
    """Which flagged ids each shard holds (reads the id column only)."""
    value_set = pa.array(sorted(flagged), type=pa.string())
    out = []
    for shard in ds.shards():
        ids = ds.table(shard, ["id"])["id"]
        hits = ids.filter(pc.is_in(ids, value_set=value_set)).to_pylist()
        out.append(_Plan(shard, hits, len(ids) - len(hits)))
    return out


def _stage(ds: DatasetDir, plan: list[_Plan], dest: Path, in_place: bool) -> list[StagedShard]:
    """Every shard that keeps a row, finished: rewritten without its hits, kept, or copied."""
    staging = fresh_staging(dest)
    group_rows = (ds.manifest.get("recipe") or {}).get("publish", {}).get("row_group_size", ROW_GROUP_ROWS)
    staged = []
    for p in plan:
        if not p.kept:
            continue
        if not p.hits and in_place:
            staged.append(StagedShard(p.shard.path, p.shard.split, p.kept, p.shard.sha256))
            continue
        path = staging / Path(p.shard.name).name
        if p.hits:
            hits = set(p.hits)
            arrival = ARRIVAL_COLUMN in pq.read_schema(p.shard.path).names
            out = ShardFile(path, group_rows, arrival)
            for row in ds.shard_rows(p.shard):
                if row["id"] not in hits:
                    out.add(row)
            out.close()
        else:
            shutil.copyfile(p.shard.path, path)
        staged.append(StagedShard(path, p.shard.split, p.kept, None if p.hits else p.shard.sha256))
    return staged


def _manifest_without(ds: DatasetDir, shards: list[dict[str, Any]], found: list[str]) -> dict[str, Any]:
    manifest = copy.deepcopy(ds.manifest)
    manifest["shards"] = shards
    manifest["counts"]["samples"] = sum(s["rows"] for s in shards)
    manifest["counts"][REASON] = manifest["counts"].get(REASON, 0) + len(found)
    manifest["rejects"] = dict(sorted({**manifest["rejects"],
                                       REASON: manifest["rejects"].get(REASON, 0) + len(found)}.items()))
    manifest.update(ds.statistics(without=found).manifest_fields())
    review = manifest.setdefault("review", {})
    review["excluded"] = sorted(set(review.get("excluded", [])) | set(found))
    validate("manifest", manifest)
    return manifest


def _write_beside_shards(ds: DatasetDir, dest: Path, manifest: dict[str, Any], rejects: list[dict[str, Any]],
                         in_place: bool) -> None:
    """rejects.jsonl as it was (line for line) plus the new rejects, the card, then the manifest."""
    if not in_place:
        for name in _COPIED:
            if (ds.root / name).is_file():
                shutil.copy2(ds.root / name, dest / name)
    old = (ds.root / REJECTS).read_text("utf-8") if (ds.root / REJECTS).is_file() else ""
    if old and not old.endswith("\n"):
        old += "\n"
    write_text(dest / REJECTS, old + "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rejects))
    write_card(dest, manifest)  # reads the new shards for its statistics
    write_json(dest / MANIFEST, manifest)  # last: the dataset is consistent once it lands


def exclude_rows(out: str | Path, notes: dict[str, str], dest: str | Path | None = None) -> Exclusion:
    """Write `out` without the rows in `notes` (id -> reviewer's note) into `dest` (default: in place).

    One shard is read at a time, a row group at a time; shards without a flagged row are kept
    (in place) or copied byte for byte, and only renamed where the shard count of their split changed.
    """
    ds = DatasetDir.open(out, check_shards=True)
    dest = Path(dest) if dest is not None else ds.root
    in_place = dest.resolve() == ds.root.resolve()
    if not in_place and dest.exists() and any(p.name != LOCK for p in dest.iterdir()):
        raise DatasetError(f"{dest} exists and is not empty: publish into a new folder, or omit --to to rewrite in place")
    with FolderLock.acquire(ds.root, "publish --exclude"):
        ds = DatasetDir.open(out, check_shards=True)  # as it is now that no run can change it
        if in_place:
            return _exclude(ds, notes, dest, in_place)
        with FolderLock.acquire(dest, "publish --exclude"):
            return _exclude(ds, notes, dest, in_place)


def _exclude(ds: DatasetDir, notes: dict[str, str], dest: Path, in_place: bool) -> Exclusion:
    ds.verify_checksums()  # a damaged shard rewritten here would get a fresh, matching checksum
    plan = _plan(ds, set(notes))
    found = [rid for p in plan for rid in p.hits]
    unknown = sorted(set(notes) - set(found))
    if unknown:
        log.info("%d flagged id(s) are not in %s (already excluded, or flags of another dataset): %s",
                 len(unknown), ds.root, ", ".join(unknown[:5]) + (" …" if len(unknown) > 5 else ""))
    kept = sum(p.kept for p in plan)
    if not found and in_place:
        log.info("no flagged row is in %s; nothing to rewrite", ds.root)
        return Exclusion(dest=dest, kept=kept, excluded=[], unknown=unknown, shards=ds.manifest["shards"])
    if kept == 0:
        raise DatasetError(f"every row of {ds.root} is flagged; refusing to publish an empty dataset")

    try:
        staged = _stage(ds, plan, dest, in_place)
        shards = describe_shards(staged)
        manifest = _manifest_without(ds, shards, found)
        rejects = [{"stage": r.stage, "id": r.id, "reason": r.reason, "detail": r.detail}
                   for r in review_rejects({rid: notes[rid] for rid in found})]
        for r in rejects:
            validate("reject", r)
        # Everything is computed and staged: only renames and small writes from here on. The
        # exclusions first, so that from here on any run keeps these rows out.
        kept_out = {**read_exclusions(ds.root), **{rid: notes[rid] for rid in found}}
        write_jsonl(dest / EXCLUSIONS, ({"id": rid, "note": note} for rid, note in kept_out.items()))
        install_shards(dest, staged, shards)
    finally:
        shutil.rmtree(dest / STAGING, ignore_errors=True)
    _write_beside_shards(ds, dest, manifest, rejects, in_place)
    log.info("wrote %s without %d flagged row(s): %d rows kept", dest, len(found), kept)
    return Exclusion(dest=dest, kept=kept, excluded=found, unknown=unknown, shards=shards)

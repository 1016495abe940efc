"""`kame-data publish --exclude FLAGS`: the dataset again, without the rows a reviewer flagged.

Shards are rewritten whole under temporary names and only then renamed; rejects.jsonl, the card
and the manifest (shard rows, bytes and sha256, counts, statistics) follow, the manifest last, so
that `kame-data validate` holds afterwards. Excluded rows become `flagged_in_review` rejects: nothing
disappears without a record.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kame_data.atomic import write_json, write_text
from kame_data.dataset.card import write_card
from kame_data.dataset.shards import sha256_file
from kame_data.review.data import ReviewError, open_dataset
from kame_data.schema import validate

log = logging.getLogger(__name__)

REASON = "flagged_in_review"
_COPIED = ("run.log",)  # other top-level files a copy (--to) keeps as they are


@dataclass
class PublishResult:
    dest: Path
    kept: int
    excluded: list[str]
    unknown: list[str]  # flagged ids that are not in the dataset
    shards: list[dict[str, Any]] = field(default_factory=list)


def _temp_in(folder: Path, name: str) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    os.close(fd)
    return Path(tmp)


def _statistics(paths: list[Path]) -> dict[str, Any]:
    """The manifest's per-row statistics, recomputed over the shards that remain (small columns only)."""
    per_source: Counter = Counter()
    levels: Counter = Counter()
    seconds = 0.0
    events = 0
    for path in paths:
        t = pq.read_table(path, columns=["source", "duration", "oracle"])
        per_source.update(t["source"].to_pylist())
        seconds += pc.sum(t["duration"]).as_py() or 0.0
        flat = pc.list_flatten(t["oracle"])
        events += len(flat)
        levels.update(pc.struct_field(flat, "level").to_pylist())
    return {"per_source": dict(sorted(per_source.items())),
            "levels": {str(k): v for k, v in sorted(levels.items())},
            "audio_hours": round(seconds / 3600, 4), "oracle_events": events}


def publish_excluding(out: str | Path, notes: dict[str, str], dest: str | Path | None = None) -> PublishResult:
    """Write `out` without the rows in `notes` (id -> reviewer's note) into `dest` (default: in place).

    One shard is in memory at a time; shards without a flagged row are kept (in place) or copied
    byte for byte, and only renamed where the shard count of their split changed.
    """
    ds = open_dataset(out)
    out = ds.out
    dest = Path(dest) if dest is not None else out
    in_place = dest.resolve() == out.resolve()
    if not in_place and dest.exists() and any(dest.iterdir()):
        raise ReviewError(f"{dest} exists and is not empty: publish into a new folder, or omit --to to rewrite in place")
    flagged = pa.array(sorted(notes), type=pa.string())

    plan = []  # (shard, flagged ids in it, rows kept)
    for shard in ds.manifest["shards"]:
        ids = pq.read_table(out / shard["path"], columns=["id"])["id"]
        hits = ids.filter(pc.is_in(ids, value_set=flagged)).to_pylist()
        plan.append((shard, hits, len(ids) - len(hits)))
    found = [rid for _, hits, _ in plan for rid in hits]
    unknown = sorted(set(notes) - set(found))
    if unknown:
        log.info("%d flagged id(s) are not in %s (already excluded, or flags of another dataset): %s",
                 len(unknown), out, ", ".join(unknown[:5]) + (" …" if len(unknown) > 5 else ""))
    kept_rows = sum(n for _, _, n in plan)
    if not found and in_place:
        log.info("no flagged row is in %s; nothing to rewrite", out)
        return PublishResult(dest=dest, kept=kept_rows, excluded=[], unknown=unknown, shards=ds.manifest["shards"])
    if kept_rows == 0:
        raise ReviewError(f"every row of {out} is flagged; refusing to publish an empty dataset")

    data = dest / "data"
    data.mkdir(parents=True, exist_ok=True)
    per_split = Counter(shard["split"] for shard, _, n in plan if n)
    index: Counter = Counter()
    staged: list[Path] = []  # temporary files, removed if anything fails
    moves: list[tuple[Path, str]] = []  # file -> final name under data/
    shards: list[dict[str, Any]] = []
    try:
        for shard, hits, n in plan:
            if not n:
                continue
            split, src = shard["split"], out / shard["path"]
            name = f"{split}-{index[split]:05d}-of-{per_split[split]:05d}.parquet"
            index[split] += 1
            if hits:
                table = pq.read_table(src)
                table = table.filter(pc.invert(pc.is_in(table["id"], value_set=flagged)))
                source = _temp_in(data, name)
                staged.append(source)
                pq.write_table(table, source, compression="zstd", row_group_size=8)
                del table
                with open(source, "rb+") as fh:
                    os.fsync(fh.fileno())
            elif in_place:
                source = src
            else:
                source = _temp_in(data, name)
                staged.append(source)
                shutil.copyfile(src, source)
            sha = shard["sha256"] if not hits and shard.get("sha256") else sha256_file(source)
            shards.append({"path": f"data/{name}", "split": split, "rows": n, "bytes": source.stat().st_size,
                           "sha256": sha})
            moves.append((source, name))

        manifest = copy.deepcopy(ds.manifest)
        manifest["shards"] = shards
        manifest["counts"]["samples"] = kept_rows
        manifest["counts"][REASON] = manifest["counts"].get(REASON, 0) + len(found)
        manifest["rejects"] = dict(sorted({**manifest["rejects"],
                                           REASON: manifest["rejects"].get(REASON, 0) + len(found)}.items()))
        manifest.update(_statistics([source for source, _ in moves]))
        review = manifest.setdefault("review", {})
        review["excluded"] = sorted(set(review.get("excluded", [])) | set(found))
        validate("manifest", manifest)
        new_rejects = [{"stage": "review", "id": rid, "reason": REASON, "detail": notes[rid] or "flagged by a reviewer"}
                       for rid in found]
        for r in new_rejects:
            validate("reject", r)

        # Everything is computed and staged: only renames and small writes from here on.
        for source, name in moves:
            if source != data / name:
                os.replace(source, data / name)
    finally:
        for tmp in staged:
            if tmp.exists():
                tmp.unlink()
    final = {name for _, name in moves}
    for old in data.glob("*.parquet"):
        if old.name not in final:
            old.unlink()
    if not in_place:
        for name in _COPIED:
            if (out / name).is_file():
                shutil.copy2(out / name, dest / name)
    old_rejects = (out / "rejects.jsonl").read_text("utf-8") if (out / "rejects.jsonl").is_file() else ""
    if old_rejects and not old_rejects.endswith("\n"):
        old_rejects += "\n"
    write_text(dest / "rejects.jsonl", old_rejects + "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in new_rejects))
    write_card(dest, manifest)  # reads the new shards for its statistics
    write_json(dest / "manifest.json", manifest)  # last: the dataset is consistent once it lands
    log.info("published %s: %d rows kept, %d excluded", dest, kept_rows, len(found))
    return PublishResult(dest=dest, kept=kept_rows, excluded=found, unknown=unknown, shards=shards)

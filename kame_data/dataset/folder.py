"""The one reader of a kame-data output folder: its manifest, its shards per split, its rows and
its figures. Validation, the card, exports, the hub push, the review tools and the trainer all
open a dataset here, so "what is in this folder" has a single answer.

Rows stream a few at a time (a batch of one shard), so no caller holds a large dataset in memory.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kame_data.dataset.layout import EXCLUSIONS, MANIFEST, REJECTS, DatasetError  # noqa: F401 - re-exported
from kame_data.dataset.shards import sha256_file, shard_split
from kame_data.dataset.stats import EVENT_COLUMNS, OPTIONAL_COLUMNS, ROW_COLUMNS, RowStats
from kame_data.schema import SchemaError, validate

log = logging.getLogger(__name__)

BATCH_ROWS = 16  # rows decoded at a time, whatever the shard size
META_COLUMNS = ("id", "item_id", "source", "category", "variant", "duration", "turns", "words", "oracle",
                "oracle_arrival")  # no audio; oracle_arrival where a latency model gave it (OPTIONAL_COLUMNS)


@dataclass(frozen=True)
class Shard:
    """One Parquet shard as the manifest lists it (`rows` is None when there is no manifest)."""

    name: str  # the manifest's path, relative to the folder: data/{split}-{i}-of-{n}.parquet
    split: str
    path: Path
    rows: int | None = None
    sha256: str | None = None


def read_rows(path: Path, columns: Iterable[str] | None = None, ids: Iterable[str] | None = None,
              batch_rows: int = BATCH_ROWS) -> Iterator[dict[str, Any]]:
    """Rows of one Parquet file, `batch_rows` at a time; `columns=None` reads every column
    (audio included); `ids` keeps only those rows."""
    wanted = pa.array(sorted(set(ids)), type=pa.string()) if ids is not None else None
    pf = pq.ParquetFile(path)
    cols = list(columns) if columns is not None else None
    if cols is not None:  # a column only some datasets have is read where it is there
        cols = [c for c in cols if c not in OPTIONAL_COLUMNS or c in pf.schema_arrow.names]
    for batch in pf.iter_batches(batch_size=batch_rows, columns=cols):
        if wanted is not None:
            batch = batch.filter(pc.is_in(batch.column("id"), value_set=wanted))
        yield from batch.to_pylist()


def _read_manifest(root: Path, check_schema: bool) -> dict[str, Any]:
    path = root / MANIFEST
    if not path.is_file():
        raise DatasetError(f"{path} is missing: is {root} a kame-data output folder (from `kame-data run`)?", MANIFEST)
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path} is not valid JSON: {e}", MANIFEST) from e
    if check_schema:
        try:
            validate("manifest", manifest)
        except SchemaError as e:
            raise DatasetError(e.message, f"{MANIFEST}:{e.path}") from e
    if not isinstance(manifest, dict) or not isinstance(manifest.get("shards"), list) or not manifest["shards"]:
        raise DatasetError(f"{path} lists no shards", f"{MANIFEST}:shards")
    return manifest


class DatasetDir:
    """A dataset folder and its manifest; `open` reads them, the constructor takes a manifest in
    memory (one about to be written, whose shards are already in place)."""

    def __init__(self, root: str | Path, manifest: dict[str, Any] | None):
        self.root = Path(root)
        self.manifest = manifest

    @classmethod
    def open(cls, root: str | Path, check_schema: bool = False, check_shards: bool = False,
             need_manifest: bool = True) -> "DatasetDir":
        """Read ROOT/manifest.json; `check_schema` validates it against the manifest schema,
        `check_shards` requires every listed shard to be there. Without `need_manifest`, a folder
        with no manifest is read by the shard files under data/ (the trainer accepts such a
        folder). Raises DatasetError."""
        root = Path(root)
        if not need_manifest and not (root / MANIFEST).is_file() and (root / "data").is_dir():
            return cls(root, None)
        ds = cls(root, _read_manifest(root, check_schema))
        if check_shards:
            for shard in ds.shards():
                if not shard.path.is_file():
                    raise DatasetError(f"shard {shard.name} listed in {root / MANIFEST} is missing", shard.name)
        return ds

    # ------------------------------------------------------------------------------- shards

    def shards(self, split: str | None = None) -> list[Shard]:
        """The shards in dataset order (split by split, index by index); only `split`'s when given."""
        if self.manifest is None:
            every = [Shard(f"data/{p.name}", split, p) for p in sorted((self.root / "data").glob("*.parquet"))
                     if (split := shard_split(p.name))]
        else:
            every = [self._listed(s) for s in self.manifest["shards"]]
        return [s for s in every if split is None or s.split == split]

    def _listed(self, entry: Any) -> Shard:
        """A manifest's shard entry, refused unless it names a shard file under data/ of its own
        split: the split names folders of an export, the path is opened, so neither may leave ROOT."""
        path, split = (entry.get("path"), entry.get("split")) if isinstance(entry, dict) else (None, None)
        name = Path(path).name if isinstance(path, str) else ""
        if not isinstance(split, str) or path != f"data/{name}" or shard_split(name) != split:
            raise DatasetError(f"{self.root / MANIFEST}: shard entry path={path!r} split={split!r} is not "
                               "data/<split>-NNNNN-of-NNNNN.parquet with a split of a-z, 0-9 and _: refusing to "
                               "use it (was the manifest edited?)", f"{MANIFEST}:shards")
        return Shard(path, split, self.root / path, entry.get("rows"), entry.get("sha256"))

    def verify_checksums(self) -> None:
        """Every shard's bytes against the sha256 the manifest lists (streamed), before a command
        reads rows: a shard damaged in place, even at the same length, is named instead of used."""
        for shard in self.shards():
            if shard.sha256 and sha256_file(self._present(shard)) != shard.sha256:
                raise DatasetError(f"shard {shard.name} does not match its sha256 in {self.root / MANIFEST} (damaged "
                                   f"or changed since it was written): rerun the `kame-data run` command that made "
                                   f"{self.root} to rewrite it", shard.name)

    def stray_shards(self) -> list[str]:
        """Parquet files under data/ that the manifest does not list (sorted)."""
        listed = {s.name for s in self.shards()}
        return sorted(name for p in (self.root / "data").glob("*.parquet") if (name := f"data/{p.name}") not in listed)

    @property
    def splits(self) -> list[str]:
        return list(dict.fromkeys(s.split for s in self.shards()))

    def _present(self, shard: Shard) -> Path:
        if not shard.path.is_file():
            raise DatasetError(f"shard {shard.name} is missing; run `kame-data validate {self.root}`", shard.name)
        return shard.path

    def parquet(self, shard: Shard) -> pq.ParquetFile:
        return pq.ParquetFile(self._present(shard))

    def num_rows(self, split: str | None = None) -> int:
        """Rows in the shards (of `split`), from the Parquet footers."""
        return sum(self.parquet(s).metadata.num_rows for s in self.shards(split))

    def table(self, shard: Shard, columns: Iterable[str]) -> pa.Table:
        """A few columns of one shard, whole (small columns only: never the audio of a large shard)."""
        return pq.read_table(self._present(shard), columns=list(columns))

    # --------------------------------------------------------------------------------- rows

    def shard_rows(self, shard: Shard, columns: Iterable[str] | None = None,
                   ids: Iterable[str] | None = None) -> Iterator[dict[str, Any]]:
        yield from read_rows(self._present(shard), columns, ids)

    def rows(self, columns: Iterable[str] | None = None, split: str | None = None,
             ids: Iterable[str] | None = None) -> Iterator[dict[str, Any]]:
        """Rows in dataset order (see `read_rows` for `columns` and `ids`)."""
        cols = list(columns) if columns is not None else None
        for shard in self.shards(split):
            yield from self.shard_rows(shard, cols, ids)

    def ids(self) -> list[str]:
        return [r["id"] for r in self.rows(columns=["id"])]

    def statistics(self, events: bool = True, without: Iterable[str] = ()) -> RowStats:
        """Figures over every row but those in `without` (never reading the audio); `events=False`
        leaves out the oracle figures and reads only the small columns."""
        stats = RowStats()
        skip = set(without)
        columns = ("id",) + ROW_COLUMNS + (EVENT_COLUMNS if events else ())
        for shard in self.shards():
            for row in self.shard_rows(shard, columns):
                if row["id"] not in skip:
                    stats.add_row(row, shard.split)
        return stats

    def rejects(self) -> list[dict[str, Any]]:
        """Every line of rejects.jsonl (an empty list when the file is absent)."""
        path = self.root / REJECTS
        if not path.is_file():
            return []
        out = []
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    log.warning("%s line %d is not JSON; skipped", path, n)
        return out

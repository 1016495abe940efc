"""Training windows streamed from token shards, in an order every rank agrees on.

Token Parquet is read one block of row groups at a time (`TokenShards`), so memory depends on the
block size, not on how many dialogues there are. Each epoch permutes the row groups (seeded by
seed and epoch), cuts them into blocks of `groups_per_block`, and shuffles the windows inside each
block: a block shuffle, as streaming loaders do. A window list in memory (`InMemory`) is the same
thing with one block.

The stream is global: a micro-step takes the next `batch_size` windows of it, and rank r of W keeps
its slice of batch_size / W. A window's oracle augmentation is drawn from a generator seeded by
its position in the stream, so which rank renders it changes nothing: W processes see exactly the
global batch one process would. The position (epoch, block, offset) is the whole resumable state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Protocol, Sequence

import numpy as np

from kame_data.train.errors import TrainError
from kame_data.train.data import Batch, Window, collate, windows_from_rows
from kame_data.train.streams import OracleAugment


class WindowSource(Protocol):
    def num_groups(self) -> int: ...

    def windows(self, groups: Sequence[int]) -> list[Window]: ...


class InMemory:
    """Windows already in memory (tests, small eval sets): one group holding all of them."""

    def __init__(self, windows: list[Window]):
        self.items = list(windows)

    def num_groups(self) -> int:
        return 1 if self.items else 0

    def windows(self, groups: Sequence[int]) -> list[Window]:
        return list(self.items) if groups else []


class TokenShards:
    """A split of a token dataset, one Parquet row group at a time. Nothing is read until asked,
    except each file's footer."""

    def __init__(self, files: Sequence[Path], speakers: list[str], n_q: int, dep_q: int, max_frames: int,
                 min_frames: int = 0):
        import pyarrow.parquet as pq

        self.args = (speakers, n_q, dep_q, max_frames, min_frames)
        self.groups: list[tuple[Path, int]] = []
        self.rows = 0
        for f in files:
            md = pq.ParquetFile(f).metadata
            self.groups += [(Path(f), i) for i in range(md.num_row_groups) if md.row_group(i).num_rows]
            self.rows += md.num_rows

    def num_groups(self) -> int:
        return len(self.groups)

    def windows(self, groups: Sequence[int]) -> list[Window]:
        import pyarrow.parquet as pq

        out: list[Window] = []
        for g in groups:
            path, i = self.groups[g]
            table = pq.ParquetFile(path).read_row_group(i)
            rows = table.drop_columns(["A", "B"]).to_pylist()  # ids and the small event columns
            for sp in ("A", "B"):
                for row, codes in zip(rows, _matrices(table.column(sp))):
                    row[sp] = codes
            out += windows_from_rows(rows, *self.args)
        return out


def _matrices(column) -> list[np.ndarray]:
    """A list<list<int64>> column as one [rows, T] int64 array per row, read straight from Arrow's
    buffers (Python lists would take several times the memory of the tokens)."""
    arr = column.combine_chunks()
    outer = arr.offsets.to_numpy()
    inner = arr.values.offsets.to_numpy()
    values = arr.values.values.to_numpy(zero_copy_only=False)
    out = []
    for i in range(len(arr)):
        a, b = int(outer[i]), int(outer[i + 1])
        out.append(values[inner[a]:inner[b]].reshape(b - a, -1) if b > a else np.zeros((0, 0), np.int64))
    return out


class Loader:
    """Endless batches of one rank's share of the global stream; `state()` / `load_state()` resume
    it exactly (also with another number of ranks, as long as the global batch is the same)."""

    def __init__(self, source: WindowSource | list[Window], batch_size: int, seed: int, oracle_start_id: int,
                 aug: OracleAugment, blank_oracle: bool = False, rank: int = 0, world: int = 1,
                 groups_per_block: int = 4):
        self.source = InMemory(source) if isinstance(source, list) else source
        if not self.source.num_groups():
            raise TrainError("no training windows: the training split has no dialogues")
        if batch_size % world:
            raise TrainError(f"train.batch_size {batch_size} is the global batch: it must divide among "
                             f"{world} processes")
        self.batch_size, self.seed, self.rank, self.world = batch_size, seed, rank, world
        self.oracle_start_id, self.aug, self.blank = oracle_start_id, aug, blank_oracle
        self.groups_per_block = max(1, groups_per_block)
        self.epoch, self.block, self.offset = 0, 0, 0
        self._loaded: tuple[int, int] | None = None
        self._windows: list[Window] = []

    def _blocks(self, epoch: int) -> list[np.ndarray]:
        n = self.source.num_groups()
        perm = np.random.default_rng([self.seed, 2, epoch]).permutation(n)
        return [perm[i:i + self.groups_per_block] for i in range(0, n, self.groups_per_block)]

    def _load(self) -> list[Window]:
        """The current block's windows in their shuffled order (read once per block)."""
        if self._loaded != (self.epoch, self.block):
            self._windows = []  # let the previous block go before reading the next
            ws = self.source.windows(self._blocks(self.epoch)[self.block].tolist())
            order = np.random.default_rng([self.seed, 0, self.epoch, self.block]).permutation(len(ws))
            self._windows = [ws[int(i)] for i in order]
            self._loaded = (self.epoch, self.block)
        return self._windows

    def _take(self) -> Iterator[tuple[Window, np.random.Generator]]:
        """The next window of the global stream and its augmentation generator."""
        empty_blocks = 0
        while True:
            ws = self._load()
            if self.offset < len(ws):
                pos = (self.epoch, self.block, self.offset)
                self.offset += 1
                yield ws[pos[2]], np.random.default_rng([self.seed, 1, *pos])
                return
            empty_blocks = empty_blocks + 1 if not ws else 0
            if empty_blocks > 2 * len(self._blocks(self.epoch)):  # a whole epoch passed without a window
                raise TrainError("no training windows: every dialogue is shorter than data.min_frames")
            self.block, self.offset = self.block + 1, 0
            if self.block >= len(self._blocks(self.epoch)):
                self.epoch, self.block = self.epoch + 1, 0

    def next_batch(self, step: int = 0) -> Batch:
        """This rank's slice of the next global batch; `step`: optimizer steps done so far."""
        per = self.batch_size // self.world
        mine = range(self.rank * per, (self.rank + 1) * per)
        picked, rngs, longest = [], [], 0
        for j in range(self.batch_size):
            for w, rng in self._take():
                longest = max(longest, w.codes.shape[1])
                if j in mine:
                    picked.append(w)
                    rngs.append(rng)
        return collate(picked, self.oracle_start_id, rngs, self.aug, self.blank, length=longest, step=step)

    def state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "block": self.block, "offset": self.offset}

    def load_state(self, st: dict[str, Any]) -> None:
        if "block" not in st:
            raise TrainError("this checkpoint was written by an older trainer (whole-dataset loader); "
                             "start over with --restart")
        self.epoch, self.block, self.offset = int(st["epoch"]), int(st["block"]), int(st["offset"])


def eval_batches(source: WindowSource | list[Window], batch_size: int, oracle_start_id: int,
                 blank_oracle: bool = False, rank: int = 0, world: int = 1) -> Iterator[Batch]:
    """Every window once, in stored order, with the plain oracle stream; rank r takes every W-th
    window, so ranks together see each window once (their sums are added by the caller)."""
    src = InMemory(source) if isinstance(source, list) else source
    pending: list[Window] = []
    k = 0
    for g in range(src.num_groups()):
        for w in src.windows([g]):
            if k % world == rank:
                pending.append(w)
            k += 1
            if len(pending) == batch_size:
                yield collate(pending, oracle_start_id, None, OracleAugment(), blank_oracle)
                pending = []
    if pending:
        yield collate(pending, oracle_start_id, None, OracleAugment(), blank_oracle)

"""Item-level checkpoints: each stage's outputs for one input, stored under a key derived from
the stage, the part of its config that can change an output, and that input. A rerun finds them
and skips the work; a changed config changes the keys of that stage and every later one, and only
those are recomputed. Settings that cannot change a row (workers, timeouts, budgets, retries:
fields marked `operational` in their config) are not part of the key.

Checkpoints are written with `kame_data.codec` (no pickle: nothing read back can run code) and
carry a checksum: a damaged one is named in the log, discarded and recomputed."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

from kame_data.codec import CodecError, decode, encode
from kame_data.step import identity_of
from kame_data.storage import Location, Storage

log = logging.getLogger(__name__)

FORMAT = "2"  # bump when record layouts change: old checkpoints are then ignored, not misread
SUFFIX = ".rec"


def digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def config_key(stage_name: str, config: Any) -> str:
    """A stage's identity: its name and what of its config can change an output (a dataclass,
    whose `operational` fields are left out, or a JSON-able value)."""
    return digest(FORMAT, stage_name, json.dumps(identity_of(config), sort_keys=True, default=str))


def item_key(item: Any) -> str:
    """The key of a source item: a hash of its full content (so an edited item is redone)."""
    return digest(FORMAT, "item", json.dumps(item.to_dict(), sort_keys=True, ensure_ascii=False))


@dataclass(frozen=True)
class Keyed:
    """A record travelling through the runner with the key of its lineage."""

    key: str
    record: Any


class CheckpointStore:
    """Per-item results under ROOT/<stage>/<key[:2]>/<key>.rec, each written whole.

    ROOT is OUT/.checkpoints by default; a shared path or an object-store URL (`--checkpoints`)
    lets every node of a cluster read and write the same checkpoints (kame_data/storage.py).
    `damaged` lists the checkpoints found damaged (and recomputed) by this store."""

    def __init__(self, root: Location):
        self.storage = Storage(root)
        self.root = self.storage.location  # what another process or node opens again
        self.damaged: list[str] = []
        self._lock = threading.Lock()

    @staticmethod
    def _rel(stage: str, key: str) -> str:
        return f"{stage}/{key[:2]}/{key}{SUFFIX}"

    def get(self, stage: str, key: str) -> list | None:
        """The stored outputs, or None when there are none or they are damaged (then the file is
        named in the log and removed, so the input is computed again)."""
        rel = self._rel(stage, key)
        data = self.storage.read(rel)
        if data is None:
            return None
        try:
            outputs = decode(data)
            if not isinstance(outputs, list):
                raise CodecError(f"a {type(outputs).__name__} where a list of outputs was stored")
            return outputs
        except CodecError as e:
            where = f"{self.root}/{rel}"
            log.warning("damaged checkpoint %s (%s): discarded, the item is computed again", where, e)
            with self._lock:
                self.damaged.append(where)
            self.storage.delete(rel)
            return None

    def put(self, stage: str, key: str, outputs: list) -> None:
        self.storage.write(self._rel(stage, key), encode(list(outputs)))

    @staticmethod
    def _marker(stage: str, key: str) -> str:
        return f"{stage}/{key[:2]}/{key}.retry"

    def mark_transient(self, stage: str, key: str) -> None:
        """The input's result was not final (a transient reject): nothing is stored for it, only
        that it was tried, so a rerun can say how many it retried."""
        self.storage.write(self._marker(stage, key), b"")

    def was_transient(self, stage: str, key: str) -> bool:
        return self.storage.read(self._marker(stage, key)) is not None

    def clear_transient(self, stage: str, key: str) -> None:
        self.storage.delete(self._marker(stage, key))

    def count(self, stage: str) -> int:
        return self.storage.count(stage, SUFFIX)

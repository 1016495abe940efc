"""Item-level checkpoints: each stage's outputs for one input, stored under a key derived from
the stage, its config and that input. A rerun finds them and skips the work; a changed config
changes the keys of that stage and every later one, and only those are recomputed."""

from __future__ import annotations

import hashlib
import json
import pickle
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

from kame_data.storage import Location, Storage

FORMAT = "1"  # bump when record layouts change: old checkpoints are then ignored, not misread


def digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def config_key(stage_name: str, config: Any) -> str:
    """A stage's identity: its name and its config (a dataclass or JSON-able value)."""
    data = asdict(config) if is_dataclass(config) else config
    return digest(FORMAT, stage_name, json.dumps(data, sort_keys=True, default=str))


def item_key(item: Any) -> str:
    """The key of a source item: a hash of its full content (so an edited item is redone)."""
    return digest(FORMAT, "item", json.dumps(item.to_dict(), sort_keys=True, ensure_ascii=False))


@dataclass(frozen=True)
class Keyed:
    """A record travelling through the runner with the key of its lineage."""

    key: str
    record: Any


class CheckpointStore:
    """Pickled per-item results under ROOT/<stage>/<key[:2]>/<key>.pkl, each written whole.

    ROOT is OUT/.checkpoints by default; a shared path or an object-store URL (`--checkpoints`)
    lets every node of a cluster read and write the same checkpoints (kame_data/storage.py)."""

    def __init__(self, root: Location):
        self.storage = Storage(root)
        self.root = self.storage.location  # what another process or node opens again

    @staticmethod
    def _rel(stage: str, key: str) -> str:
        return f"{stage}/{key[:2]}/{key}.pkl"

    def get(self, stage: str, key: str) -> list | None:
        data = self.storage.read(self._rel(stage, key))
        if data is None:
            return None
        try:
            return pickle.loads(data)
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            self.storage.delete(self._rel(stage, key))  # unreadable (e.g. another version's): recompute
            return None

    def put(self, stage: str, key: str, outputs: list) -> None:
        self.storage.write(self._rel(stage, key), pickle.dumps(outputs, protocol=pickle.HIGHEST_PROTOCOL))

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
        return self.storage.count(stage, ".pkl")

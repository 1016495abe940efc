"""`kame-data status`: progress.json of a run, with the checkpoints found on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kame_data.runner.checkpoint import CheckpointStore


def read_status(out_dir: str | Path) -> dict[str, Any]:
    out = Path(out_dir)
    path = out / "progress.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: no run has started in {out}")
    st = json.loads(path.read_text("utf-8"))
    store = CheckpointStore(out / ".checkpoints")
    for name, s in st["stages"].items():
        s["checkpoints"] = store.count(name)
    return st

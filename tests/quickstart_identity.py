"""Row identity of the quickstart: content hashes of every row, and of the part of a row that no
CPU difference can move (scripts, voices, the words said), for tests/project/test_quickstart_identity.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq

from kame_data.machine import cpu_fingerprint


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=lambda b: b.hex()).encode()).hexdigest()


def rows(out: Path) -> list[dict]:
    return [r for p in sorted((out / "data").glob("*.parquet")) for r in pq.read_table(p).to_pylist()]


def row_hashes(out: Path) -> dict[str, dict[str, str]]:
    """{"rows": id -> hash of the whole row, "text": id -> hash of its machine-independent part}."""
    full, text = {}, {}
    for r in rows(out):
        full[r["id"]] = _digest(r)
        text[r["id"]] = _digest({k: r[k] for k in ("id", "item_id", "source", "category", "variant")}
                                | {"turns": [{k: t[k] for k in ("role", "speaker", "text", "spoken", "voice")}
                                             for t in r["turns"]],
                                   "words": [(w["speaker"], w["word"]) for w in r["words"]]})
    return {"rows": full, "text": text}


if __name__ == "__main__":  # python -m tests.quickstart_identity OUT > tests/data/quickstart_limit3_row_hashes.json
    import sys

    print(json.dumps({"cpu": cpu_fingerprint(), **row_hashes(Path(sys.argv[1]))}, indent=1, sort_keys=True))

"""Reference parity of an exported dataset: what docs/design.md's ladder gives over the exported words.

The oracle step reads the floor (every word but listener backchannels, which are in the audio and
in text/, flagged in the row's `words`), and drops an event whose every attempt gave no reply (an
`empty_prediction` reject naming `id@timestamp_ms`). Both tests of parity compare on that basis."""

from __future__ import annotations

import json
from pathlib import Path

from kame_data.records import Word
from tests.quickstart_identity import rows
from tests.oracle.test_ladder import reference_ladder


def dropped_events(out: Path) -> set[tuple[str, int]]:
    """(row id, timestamp_ms) of every event the oracle step dropped for want of a reply."""
    path = out / "rejects.jsonl"
    found = set()
    for line in path.read_text().splitlines() if path.is_file() else []:
        r = json.loads(line)
        if r["stage"] == "oracle" and r["reason"] == "empty_prediction" and "@" in r["id"]:
            rid, ts = r["id"].rsplit("@", 1)
            found.add((rid, int(ts)))
    return found


def floor_reference(out: Path, dest: Path, interval: float) -> dict[str, list[dict]]:
    """Per exported row: the reference ladder over its text/ words without the backchannel entries,
    less the events the step dropped (listed in rejects.jsonl)."""
    dropped = dropped_events(out)
    expected = {}
    for row in rows(out):
        text = json.loads((dest / "text" / f"{row['id']}.json").read_text())
        floor = [Word(w["speaker"], w["word"], w["start"], w["end"])
                 for w, flags in zip(text, row["words"]) if not flags.get("backchannel")]
        expected[row["id"]] = [e for e in reference_ladder(floor, interval, target=0)
                               if (row["id"], e["timestamp_ms"]) not in dropped]
    return expected

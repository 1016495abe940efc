"""`kame-data run --until STAGE`: stop after a stage and write what it produced in a form a person
reads, e.g. the spoken scripts of a whole benchmark in seconds, before paying for speech and LLM calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kame_data.atomic import write_jsonl
from kame_data.records import Dialogue, RenderedDialogue, SourceItem

STAGES = ("sources", "script", "speak", "quality", "acoustics", "oracle")  # "oracle": the whole run minus the shards
FILES = {"sources": "items.jsonl", "script": "scripts.jsonl", "speak": "rendered.jsonl", "quality": "rendered.jsonl",
         "acoustics": "rendered.jsonl", "oracle": "samples.jsonl"}


def _dialogue(d: Dialogue) -> dict[str, Any]:
    return {"id": d.id, "item_id": d.item_id, "source": d.source, "category": d.category, "variant": d.variant,
            "turns": [{"role": t.role, "speaker": t.speaker, "text": t.text, "spoken": t.spoken} for t in d.turns]}


def _record(r: Any) -> dict[str, Any]:
    if isinstance(r, SourceItem):
        return r.to_dict()
    if isinstance(r, Dialogue):
        return _dialogue(r)
    rendered = r if isinstance(r, RenderedDialogue) else r.rendered
    out = {**_dialogue(rendered.dialogue), "duration": round(rendered.duration, 3),
           "words": [w.to_dict() for w in rendered.words],
           "timings": [{"start": t.start, "end": t.end, "voice": t.voice} for t in rendered.timings]}
    if not isinstance(r, RenderedDialogue):
        out["oracle"] = [e.to_dict() for e in r.oracle]
    return out


def write_partial(out_dir: Path, until: str, records: list[Any]) -> Path:
    """One JSON line per record of the last stage run (audio stays in the checkpoints)."""
    path = out_dir / FILES[until]
    write_jsonl(path, (_record(r) for r in records))
    return path

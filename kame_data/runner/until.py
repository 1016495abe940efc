"""`kame-data run --until STEP`: stop after a step and write what it produced in a form a person
reads, e.g. the spoken scripts of a whole benchmark in seconds, before paying for speech and LLM
calls. The steps, their order and their output files come from the registry (kame_data/pipeline.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from kame_data import pipeline
from kame_data.atomic import write_jsonl
from kame_data.dataset.rows import ORACLE_COLUMN
from kame_data.records import Dialogue, RenderedDialogue, Sample, SourceItem
from kame_data.sources.step import SourcesStep
from kame_data.step import Step

SOURCES_OUTPUT = "items.jsonl"


def choices() -> list[str]:
    """What --until takes: the sources, then every registered step in pipeline order (the last
    one means the whole run minus the shards)."""
    return [SourcesStep.name, *pipeline.names()]


def output_file(until: str) -> str:
    return SOURCES_OUTPUT if until == SourcesStep.name else pipeline.spec(until).output


def stages_until(stages: list[Step], until: str) -> list[Step]:
    """The steps of `stages` up to and including `until` (none for the sources)."""
    names = [s.name for s in stages]
    if until == SourcesStep.name:
        return []
    if until not in names:
        raise ValueError(f"--until {until!r}: not a step of this run ({', '.join(names)})")
    return stages[: names.index(until) + 1]


def summary_key(name: str) -> str:
    """Where a step's summary goes in the manifest (its spec's key; its name for an unregistered step)."""
    try:
        return pipeline.spec(name).manifest_key
    except pipeline.UnknownStep:
        return name


def _dialogue(d: Dialogue) -> dict[str, Any]:
    return {"id": d.id, "item_id": d.item_id, "source": d.source, "category": d.category, "variant": d.variant,
            "turns": [{"role": t.role, "speaker": t.speaker, "text": t.text, "spoken": t.spoken} for t in d.turns]}


def _rendered(r: RenderedDialogue) -> dict[str, Any]:
    return {**_dialogue(r.dialogue), "duration": round(r.duration, 3), "words": [w.to_dict() for w in r.words],
            "timings": [{"start": t.start, "end": t.end, "voice": t.voice} for t in r.timings]}


def _record(r: Any) -> dict[str, Any]:
    """One record as JSON: the known record types by their readable fields (audio stays in the
    checkpoints), any other record by its `to_dict` or its dataclass fields."""
    if isinstance(r, SourceItem):
        return r.to_dict()
    if isinstance(r, Dialogue):
        return _dialogue(r)
    if isinstance(r, RenderedDialogue):
        return _rendered(r)
    if isinstance(r, Sample):
        return {**_rendered(r.rendered), ORACLE_COLUMN: [e.to_dict() for e in r.oracle]}
    if hasattr(r, "to_dict"):
        return r.to_dict()
    return dataclasses.asdict(r)


def write_partial(out_dir: Path, until: str, records: list[Any]) -> Path:
    """One JSON line per record of the last step run."""
    path = out_dir / output_file(until)
    write_jsonl(path, (_record(r) for r in records))
    return path

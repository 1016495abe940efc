"""Applying one stage to keyed records, with checkpoints. Shared by every executor, so the local
and the Ray executor produce the same rows from the same stage functions."""

from __future__ import annotations

from typing import Any, Protocol

from kame_data.records import Reject
from kame_data.runner.checkpoint import CheckpointStore, Keyed, digest
from kame_data.workers import EngineCrashed


class Stage(Protocol):
    name: str

    def open(self) -> None: ...

    def process(self, batch: list) -> list: ...


def stage_groups(stage: Stage, batch: list) -> list[list]:
    """One list of outputs per input. Stages that batch across inputs implement `map`;
    for the others each input is processed alone (their process is 1:n and cheap)."""
    mapper = getattr(stage, "map", None)
    if mapper is not None:
        groups = mapper(batch)
        if len(groups) != len(batch):
            raise RuntimeError(f"stage {stage.name}: map returned {len(groups)} groups for {len(batch)} inputs")
        return groups
    return [stage.process([x]) for x in batch]


def apply_stage(stage: Stage, stage_key: str, keyed: list[Keyed], store: CheckpointStore | None) -> tuple[list[Keyed], int]:
    """Run `stage` on the non-reject records of `keyed` (rejects pass through).

    Returns the outputs in input order, each keyed by (stage identity, input key, position), and
    how many inputs were computed rather than read from checkpoints."""
    results: dict[str, list[Any]] = {}
    misses: list[Keyed] = []
    for k in keyed:
        if isinstance(k.record, Reject):
            continue
        found = store.get(stage.name, digest(stage_key, k.key)) if store is not None else None
        if found is None:
            misses.append(k)
        else:
            results[k.key] = found
    if misses:
        stage.open()  # models load only when something is left to compute (a resumed run may need none)
        try:
            groups = stage_groups(stage, [k.record for k in misses])
        except EngineCrashed as e:
            raise (e if e.items else e.on_items([str(getattr(k.record, "id", "?")) for k in misses])) from None
        for k, group in zip(misses, groups):
            if store is not None:
                store.put(stage.name, digest(stage_key, k.key), group)
            results[k.key] = group
    out: list[Keyed] = []
    for k in keyed:
        if isinstance(k.record, Reject):
            out.append(k)
            continue
        for j, rec in enumerate(results[k.key]):
            out.append(Keyed(digest(stage_key, k.key, str(j)), rec))
    return out, len(misses)

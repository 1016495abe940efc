"""`kame-data inspect`: one dialogue and its oracle ladder, readable in a terminal.

Builds rich renderables; the CLI prints them. All text from sources and the simulator goes in as
`rich.text.Text` (never markup) with control characters made visible, so data cannot restyle or
drive the terminal.
"""

from __future__ import annotations

import random
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from kame_data.dataset.folder import META_COLUMNS, DatasetDir, DatasetError
from kame_data.oracle.metrics import clean_text, early_truth, reply_spans, token_f1

LEVEL_STYLES = {0: "bold red", 1: "bold dark_orange", 2: "bold yellow", 3: "bold chartreuse3",
                4: "bold green", 5: "bold cyan"}


def _t(text: Any, style: str = "") -> Text:
    return Text(clean_text(str(text)), style=style)


def _candidates(ds: DatasetDir, source: Optional[str], level: Optional[int]) -> list[str]:
    """Ids that pass the filters, read shard by shard in Arrow (no per-event Python objects)."""
    ids: list[str] = []
    sources: set[str] = set()
    for shard in ds.shards():
        t = ds.table(shard, ["id", "source"] + (["oracle"] if level is not None else []))
        sources.update(t["source"].to_pylist())
        keep = pc.equal(t["source"], source) if source is not None else None
        if level is not None:
            events = t["oracle"]
            at_level = pc.equal(pc.struct_field(pc.list_flatten(events), "level"), level)
            rows_at = pc.unique(pc.filter(pc.list_parent_indices(events), at_level))
            has = pc.is_in(pa.array(range(t.num_rows), type=rows_at.type), value_set=rows_at)
            keep = has if keep is None else pc.and_(keep, has)
        ids.extend((t.filter(keep) if keep is not None else t)["id"].to_pylist())
    if source is not None and source not in sources:
        raise DatasetError(f"no dialogue from source {source!r} in {ds.root} (sources: {', '.join(sorted(sources))})")
    if not ids:
        what = f"from source {source!r} " if source is not None else ""
        raise DatasetError(f"no dialogue {what}in {ds.root} has an oracle event at level {level}")
    return ids


def select_rows(ds: DatasetDir, id: Optional[str] = None, random_n: Optional[int] = None,
                source: Optional[str] = None, level: Optional[int] = None,
                seed: Optional[int] = None) -> list[dict[str, Any]]:
    """The dialogues to show: one by id, N at random, or the first; filtered by source and level.

    With `level`, only dialogues whose ladder reaches that level qualify. Only the rows shown are
    read whole, so this stays quick on a large dataset.
    """
    if id is not None:
        rows = list(ds.rows(META_COLUMNS, ids=[id]))
        if not rows:
            sample = ", ".join(ds.ids()[:3])
            raise DatasetError(f"no dialogue with id {id!r} in {ds.root} (ids look like: {sample})")
        return rows
    ids = _candidates(ds, source, level)
    picked = random.Random(seed).sample(ids, min(random_n, len(ids))) if random_n is not None else ids[:1]
    by_id = {r["id"]: r for r in ds.rows(META_COLUMNS, ids=picked)}
    return [by_id[i] for i in picked]


def _header(row: dict[str, Any]) -> Text:
    levels = sorted({e["level"] for e in row["oracle"]})
    t = Text()
    t.append(clean_text(row["id"]), style="bold")
    t.append(f"   {clean_text(row['source'])} / {clean_text(row['category'])}   variant {row['variant']}"
             f"   {row['duration']:.1f} s   {len(row['words'])} words   {len(row['oracle'])} oracle events   levels ")
    for lv in levels:
        t.append(f" {lv} ", style=f"reverse {LEVEL_STYLES[lv]}")
        t.append(" ")
    return t


def _turns(row: dict[str, Any]) -> Table:
    table = Table(title="turns", title_justify="left", box=box.SIMPLE_HEAD, expand=True, show_edge=False)
    table.add_column("spk", no_wrap=True)
    table.add_column("time (s)", no_wrap=True, justify="right")
    table.add_column("voice", no_wrap=True, style="dim")
    table.add_column("text", ratio=1)
    for turn in row["turns"]:
        table.add_row(_t(f"{turn['speaker']} {turn['role']}", "bold"), f"{turn['start']:.2f}–{turn['end']:.2f}",
                      _t(turn["voice"], "dim"), _t(turn["text"]))
    return table


def _f1_style(f1: float) -> str:
    return "green" if f1 >= 0.6 else "yellow" if f1 >= 0.3 else "red"


def _hint_cell(hint: str, computed: str, width: int = 40) -> Text:
    """The hint, shortened: it is the true reply shown above, unless it disagrees with the words."""
    if not hint:
        return Text("·", style="dim")
    if hint != computed:
        return Text.assemble(("≠ words: ", "bold red"), _t(hint))
    return _t(hint if len(hint) <= width else hint[: width - 1].rstrip() + "…", "dim")


def ladder_table(row: dict[str, Any], level: Optional[int] = None) -> Table:
    """The ladder: time, level, ratio, prediction, hint where shown, token-F1 to the true reply.

    A row in italics announces each new true reply (the next speaker's next utterance), so the
    predictions below it can be read against it. A level-5 event inside a user turn (the true
    reply before the user has finished) is marked "early".
    """
    events, words = row["oracle"], row["words"]
    early = {i for i, _ in early_truth(events, row.get("turns") or [])}
    from_words = [" ".join(words[i]["word"] for i in span) for span in reply_spans(words, events)]
    table = Table(title="oracle ladder", title_justify="left", box=box.SIMPLE_HEAD, expand=True, show_edge=False)
    table.add_column("t (s)", justify="right", no_wrap=True)
    table.add_column("lvl", justify="center", no_wrap=True)
    table.add_column("ratio", justify="right", no_wrap=True)
    table.add_column("prediction", ratio=3)
    table.add_column("hint", ratio=2, style="dim")
    table.add_column("F1", justify="right", no_wrap=True)
    last_reply = None
    shown = 0
    for i, (e, computed) in enumerate(zip(events, from_words)):
        reply = e["hint"] or computed
        if level is not None and e["level"] != level:
            continue
        if reply != last_reply:
            table.add_row("", "", "", Text.assemble(("true reply: ", "bold italic"), _t(reply, "italic")), "", "",
                          end_section=False)
            last_reply = reply
        f1 = token_f1(e["prediction"], reply)
        lvl = Text(f" {e['level']} ", style=f"reverse {LEVEL_STYLES[e['level']]}")
        if i in early:
            lvl.append(" early", style="bold red")
        table.add_row(f"{e['timestamp_ms'] / 1000:.1f}", lvl,
                      f"{e['current_spoken_ratio']:.2f}", _t(e["prediction"]), _hint_cell(e["hint"], computed),
                      Text(f"{f1:.2f}", style=_f1_style(f1)))
        shown += 1
    if not shown:
        table.add_row("", "", "", Text("no oracle events" + (f" at level {level}" if level is not None else ""),
                                       style="dim"), "", "")
    return table


def render_dialogue(row: dict[str, Any], level: Optional[int] = None) -> RenderableType:
    """Header, turns with times and voices, then the ladder (only level `level` when given)."""
    return Group(_header(row), Text(""), _turns(row), ladder_table(row, level))

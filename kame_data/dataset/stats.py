"""A dataset's figures, counted in one place: the runner feeds each row as it writes it, a
DatasetDir feeds the rows of its shards, and the manifest, card, validation, review page and
`publish --exclude` all read the same counts, so none of them can disagree with another."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from kame_data.oracle.metrics import early_truth, rouge_l, token_f1, true_replies
from kame_data.oracle.serve import SERVE_RULES

# The columns `RowStats.add_row` reads (with `events`, the ones the oracle figures need too).
ROW_COLUMNS = ("item_id", "source", "category", "duration")
EVENT_COLUMNS = ("words", "oracle", "turns", "oracle_arrival")
OPTIONAL_COLUMNS = frozenset({"oracle_arrival"})  # only under a latency model (dataset/rows.ARRIVAL_COLUMN)


def event_scores(row: dict[str, Any]) -> tuple[list[float], list[float]]:
    """Token-F1 and ROUGE-L of each oracle event's prediction to the true reply (needs `words`
    and `oracle`)."""
    events = row.get("oracle") or []
    replies = true_replies(row["words"], events)
    return ([token_f1(e["prediction"], r) for e, r in zip(events, replies)],
            [rouge_l(e["prediction"], r) for e, r in zip(events, replies)])


def event_f1(row: dict[str, Any]) -> list[float]:
    """Token-F1 of each oracle event's prediction to the true reply (needs `words` and `oracle`)."""
    return event_scores(row)[0]


def early_events(row: dict[str, Any]) -> list[tuple[int, int]]:
    """(event index, turn index) of each level-5 event inside a turn of the speaker being heard
    (needs `oracle` and `turns`): the true reply handed over before the user has finished."""
    return early_truth(row.get("oracle") or [], row.get("turns") or [])


def arrival_figures(row: dict[str, Any]) -> dict[str, Any] | None:
    """A row's oracle arrival figures (None without an oracle_arrival column): each sent event's
    delay from its ladder time to its first chunk (ms), and the served stream's reply pieces."""
    arrived = row.get("oracle_arrival")
    if not arrived:
        return None
    sent = [a for a in arrived if a["sent"]]
    return {"delays_ms": [a["piece_ms"][0] - a["ideal_ms"] for a in sent if a["piece_ms"]],
            "events": len(arrived), "sent": len(sent), "played": sum(a["frame"] is not None for a in arrived),
            **{k: sum(a[k] for a in arrived) for k in ("read", "late", "cut")}}


def sample_figures(row: dict[str, Any]) -> dict[str, Any]:
    """What `RowStats.add` needs of one row, small enough to keep per sample."""
    f1, rouge = event_scores(row)
    return {"source": row["source"], "duration": row["duration"],
            "levels": [e["level"] for e in row.get("oracle") or []], "f1": f1, "rouge_l": rouge,
            "early": len(early_events(row)), "arrival": arrival_figures(row)}


@dataclass
class Arrivals:
    """Oracle arrival figures summed over rows (docs/design.md, "Oracle arrival")."""

    delays_ms: list[int] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def add(self, figures: dict[str, Any]) -> None:
        self.delays_ms.extend(figures["delays_ms"])
        self.counts.update({k: v for k, v in figures.items() if k != "delays_ms"})

    def manifest(self) -> dict[str, Any]:
        d = sorted(self.delays_ms)
        c = self.counts
        pieces = c["read"] + c["late"] + c["cut"]

        def q(p: float) -> float | None:
            return round(d[min(len(d) - 1, int(p * (len(d) - 1) + 0.5))] / 1000, 3) if d else None

        return {"events": c["events"], "sent": c["sent"], "played": c["played"],
                "delay_s": {"median": q(0.5), "p95": q(0.95), "min": q(0.0), "max": q(1.0)},
                "pieces": {"read": c["read"], "late": c["late"], "cut": c["cut"]},
                "late_share": round(c["late"] / pieces, 4) if pieces else 0.0, "rules": SERVE_RULES}


@dataclass
class Group:
    """Dialogues, seconds and distinct items of one source or one split."""

    dialogues: int = 0
    seconds: float = 0.0
    items: set[str] = field(default_factory=set)

    def figures(self) -> dict[str, Any]:
        return {"dialogues": self.dialogues, "items": len(self.items), "hours": round(self.seconds / 3600, 4)}


class RowStats:
    """Counts over rows, one row at a time (nothing but the counts is kept).

    `f1=False` skips the similarities of every event (the slowest figures); `keep_f1=True` keeps
    each value per level (for quantiles), not only the sums. Per source, the similarities average
    the simulated events only (levels 0-4: level 5 is the reply itself).
    """

    def __init__(self, f1: bool = True, keep_f1: bool = False):
        self.with_f1 = f1
        self.samples = 0
        self.seconds = 0.0
        self.events = 0
        self.per_source: dict[str, Group] = {}
        self.per_split: dict[str, Group] = {}
        self.per_category: Counter[tuple[str, str]] = Counter()
        self.durations: dict[str, list[float]] = {}
        self.levels: Counter[int] = Counter()
        self.early_truth = 0  # level-5 events inside a turn of the speaker being heard
        self.f1_sum: Counter[int] = Counter()
        self.f1_count: Counter[int] = Counter()
        self.f1_values: dict[int, list[float]] | None = {} if keep_f1 else None
        self.rouge_sum: Counter[int] = Counter()
        self.rouge_values: dict[int, list[float]] | None = {} if keep_f1 else None
        self.source_similarity: dict[str, list[float]] = {}  # source -> [f1 sum, ROUGE-L sum, events]
        self.arrivals: Arrivals | None = None  # rows with an oracle_arrival column (a latency model)

    @classmethod
    def of_samples(cls, samples: Iterable[dict[str, Any]]) -> "RowStats":
        """Counts over `sample_figures`-like dicts (what the runner keeps per sample)."""
        stats = cls()
        for s in samples:
            stats.add(s["source"], s["duration"], s.get("levels", ()), s.get("f1", ()), rouge=s.get("rouge_l", ()),
                      early=s.get("early", 0), arrival=s.get("arrival"))
        return stats

    def add_row(self, row: dict[str, Any], split: str | None = None) -> None:
        """One dataset row; reads the ROW_COLUMNS present, and the EVENT_COLUMNS when present."""
        events = row.get("oracle") or []
        f1, rouge = event_scores(row) if self.with_f1 and events and "words" in row else ((), ())
        early = len(early_events(row)) if events and "turns" in row else 0
        self.add(row["source"], row.get("duration", 0.0), [e["level"] for e in events], f1,
                 item=row.get("item_id"), split=split, category=row.get("category"), rouge=rouge, early=early,
                 arrival=arrival_figures(row))

    def add(self, source: str, duration: float, levels: Iterable[int] = (), f1: Iterable[float] = (),
            item: str | None = None, split: str | None = None, category: str | None = None,
            rouge: Iterable[float] = (), early: int = 0, arrival: dict[str, Any] | None = None) -> None:
        self.samples += 1
        if arrival is not None:
            self.arrivals = self.arrivals or Arrivals()
            self.arrivals.add(arrival)
        self.early_truth += early
        self.seconds += duration
        self.durations.setdefault(source, []).append(duration)
        for name, groups in ((source, self.per_source), (split, self.per_split)):
            if name is not None:
                g = groups.setdefault(name, Group())
                g.dialogues += 1
                g.seconds += duration
                if item is not None:
                    g.items.add(item)
        if category is not None:
            self.per_category[(source, category)] += 1
        levels = list(levels)
        self.events += len(levels)
        self.levels.update(levels)
        for level, value in zip(levels, f1):
            self.f1_sum[level] += value
            self.f1_count[level] += 1
            if self.f1_values is not None:
                self.f1_values.setdefault(level, []).append(value)
        for level, f, r in zip(levels, f1, rouge):
            self.rouge_sum[level] += r
            if self.rouge_values is not None:
                self.rouge_values.setdefault(level, []).append(r)
            if level < 5:
                sums = self.source_similarity.setdefault(source, [0.0, 0.0, 0])
                sums[0] += f
                sums[1] += r
                sums[2] += 1

    def manifest_fields(self) -> dict[str, Any]:
        """The manifest's per-row statistics."""
        return {
            "per_source": {s: g.dialogues for s, g in sorted(self.per_source.items())},
            "levels": {str(k): v for k, v in sorted(self.levels.items())},
            # mean token-F1 of the prediction to the true reply: should climb with the level
            "oracle_f1_by_level": {str(k): round(self.f1_sum[k] / self.f1_count[k], 4)
                                   for k in sorted(self.levels) if self.f1_count[k]},
            "oracle_rouge_l_by_level": {str(k): round(self.rouge_sum[k] / self.f1_count[k], 4)
                                        for k in sorted(self.levels) if self.f1_count[k] and k in self.rouge_sum},
            # levels 0-4 per source: how well the simulator predicts on each source's questions
            "oracle_similarity_by_source": {s: {"token_f1": round(f / n, 4), "rouge_l": round(r / n, 4), "events": n}
                                            for s, (f, r, n) in sorted(self.source_similarity.items()) if n},
            "audio_hours": round(self.seconds / 3600, 4),
            "oracle_events": self.events,
            "early_truth_events": self.early_truth,
            **({"oracle_arrival": self.arrivals.manifest()} if self.arrivals is not None else {}),
        }

    def figures(self) -> dict[str, Any]:
        """Per-source and per-split dialogues, items and hours, and each source's sorted durations."""
        return {"per_source": {k: g.figures() for k, g in self.per_source.items()},
                "per_split": {k: g.figures() for k, g in self.per_split.items()},
                "durations": {k: sorted(v) for k, v in sorted(self.durations.items())}}

"""Fit turn-gap histograms from any word-aligned corpus, for `speak.gap` and `speak.reply.gap`.

A gap is the time from one speaker's last word to the other speaker's first word where the floor
changes hands (negative: they overlap). Sources: a kame-data dataset folder (its rows' turn
times), a kame_finetune export (`text/*.json`), or any folder or file of such word lists
(`[{"speaker", "word", "start", "end"}, ...]`). Backchannels are not turns and are left out.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

from kame_data.speech.config import GapConfig


def turns_of(words: list[dict[str, Any]]) -> list[tuple[str, float, float]]:
    """(speaker, start, end) of each run of one speaker's floor words in start order."""
    out: list[list] = []
    for w in sorted((w for w in words if not w.get("backchannel")), key=lambda w: (w["start"], w["end"])):
        if out and out[-1][0] == w["speaker"]:
            out[-1][2] = max(out[-1][2], w["end"])
        else:
            out.append([w["speaker"], w["start"], w["end"]])
    return [tuple(t) for t in out]  # type: ignore[misc]


def gaps_of(turns: Iterable[tuple[str, float, float]], assistant: str = "A") -> dict[str, list[float]]:
    """{"reply": gaps before the assistant after the user, "other": every other speaker change}."""
    out: dict[str, list[float]] = {"reply": [], "other": []}
    prev = None
    for t in turns:
        if prev is not None and t[0] != prev[0]:
            out["reply" if t[0] == assistant else "other"].append(round(t[1] - prev[2], 4))
        prev = t
    return out


def corpus_gaps(path: str | Path) -> dict[str, list[float]]:
    """Gaps of every dialogue under `path` (a dataset folder, an export folder, or a JSON file)."""
    path = Path(path)
    out: dict[str, list[float]] = {"reply": [], "other": []}

    def add(gaps: dict[str, list[float]]) -> None:
        for k in out:
            out[k] += gaps[k]

    if (path / "manifest.json").is_file():
        from kame_data.dataset.folder import DatasetDir

        for row in DatasetDir.open(path).rows(["turns"]):
            add(gaps_of((t["speaker"], t["start"], t["end"]) for t in row["turns"]))
        return out
    files = sorted((path / "text").glob("*.json")) if (path / "text").is_dir() else \
        sorted(path.glob("*.json")) if path.is_dir() else [path]
    for f in files:
        data = json.loads(f.read_text("utf-8"))
        if isinstance(data, dict):  # moshi-finetune: {"alignments": [[word, [start, end], speaker], ...]}
            data = [{"word": a[0], "start": a[1][0], "end": a[1][1], "speaker": "A" if a[2] == "SPEAKER_MAIN" else "B"}
                    for a in data.get("alignments", [])]
        add(gaps_of(turns_of(data)))
    return out


def fit_histogram(gaps: list[float], width: float = 0.1, low: float = -1.0, high: float = 2.5) -> GapConfig:
    """A histogram gap distribution with `width`-second bins over the gaps (clamped to [low, high])."""
    xs = [min(max(g, low), high - 1e-9) for g in gaps]
    if not xs:
        raise ValueError("no speaker changes to fit a gap distribution from")
    a = math.floor(min(xs) / width) * width
    n = max(1, math.ceil((max(xs) - a) / width + 1e-9))
    counts = [0] * n
    for x in xs:
        counts[min(n - 1, int((x - a) / width))] += 1
    edges = [round(a + i * width, 4) for i in range(n + 1)]
    return GapConfig(distribution="histogram", edges=tuple(edges), weights=tuple(float(c) for c in counts))

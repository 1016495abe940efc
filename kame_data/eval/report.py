"""The evaluation report: mean judge score per category and overall for each run given, side by side,
with latency figures from the runs' answer files, the paper's published figures as reference rows,
and a plot of score against oracle latency (PNG, also on an HTML page).

Scores from different judges are never put in one table: the judge model decides what a score means.
"""

from __future__ import annotations

import base64
import html
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kame_data import atomic
from kame_data.eval.judge import JUDGE_ERROR, NO_RATING, OUT_OF_RANGE, SEVERAL, SINGLE_BRACKET, rating_flags

# The KAME paper's spoken MT-Bench figures (reasoning, STEM and humanities; its own judge), overall only.
PAPER = (("Moshi (paper)", 2.05, None), ("KAME + gpt-4.1 (paper)", 6.43, None),
         ("KAME + claude-opus-4-1 (paper)", 6.23, None), ("Unmute, cascaded (paper)", 7.70, 2.1))


class ReportError(ValueError):
    """Judgments that cannot go in one report (for example, two judges); the message says which."""


# What the report counts beside the scores, per model and category (FastChat scores them all as it reads them).
FINDINGS = ("empty_answer", "silent_answer", SEVERAL, OUT_OF_RANGE, SINGLE_BRACKET, NO_RATING, JUDGE_ERROR)


@dataclass
class RunScores:
    model: str
    judge: str
    by_category: dict[str, list[float]] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)  # score -1 (FastChat leaves them out of the mean), by why
    # category -> finding -> turns: empty or silent answers (from the answer files), and what a stricter
    # reading of the ratings finds (judge.rating_flags), none of which changes the score
    findings: dict[str, dict[str, int]] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)  # first reply word - end of user speech, per turn
    took_turn: list[bool] = field(default_factory=list)
    oracle_latency: float | None = None  # the run's oracle delay setting (s), when it had one

    def count(self, category: str, finding: str) -> None:
        by = self.findings.setdefault(category, {})
        by[finding] = by.get(finding, 0) + 1

    @property
    def scores(self) -> list[float]:
        return [s for v in self.by_category.values() for s in v]

    @property
    def overall(self) -> float | None:
        return statistics.mean(self.scores) if self.scores else None


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text("utf-8").splitlines() if line.strip()]


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), without numpy."""
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def collect(judgments: list[dict[str, Any]], categories: dict[int, str],
            answers: dict[str, dict[int, dict[str, Any]]] | None = None) -> list[RunScores]:
    """One RunScores per model id, in first-seen order; raises ReportError when judges differ."""
    judges = {tuple(j["judge"])[0] for j in judgments}
    if len(judges) > 1:
        raise ReportError(f"judgments from {len(judges)} judges ({', '.join(sorted(judges))}): scores from "
                          "different judges are not comparable; report each judge's runs separately")
    runs: dict[str, RunScores] = {}
    for j in judgments:
        run = runs.setdefault(j["model"], RunScores(j["model"], j["judge"][0]))
        category = categories.get(j["question_id"], "other")
        flags = rating_flags(j.get("judgment", ""))
        for flag in flags:
            run.count(category, flag)
        if j.get("score", -1) == -1:  # as show_result: out of the mean
            reason = flags[0] if flags and flags[0] in (NO_RATING, JUDGE_ERROR) else "strict_ratings"
            run.dropped[reason] = run.dropped.get(reason, 0) + 1
            continue
        run.by_category.setdefault(category, []).append(float(j["score"]))
    for model, rows in (answers or {}).items():
        run = runs.get(model)
        if run is None:
            continue
        for row in rows.values():
            extra = row.get("kame") or {}
            category = categories.get(row["question_id"], "other")
            for k, said in enumerate(row["choices"][0]["turns"]):
                if not said.strip():
                    run.count(category, "empty_answer")
            for t in extra.get("turns", []):
                if not t.get("took_turn", True):
                    run.count(category, "silent_answer")
                run.took_turn.append(bool(t.get("took_turn")))
                if t.get("latency") is not None:
                    run.latencies.append(float(t["latency"]))
            if extra.get("oracle_latency") is not None:
                run.oracle_latency = float(extra["oracle_latency"])
    return list(runs.values())


def table(runs: list[RunScores]) -> tuple[list[str], list[list[str]]]:
    """Header and rows (text cells): per category, overall, judged/dropped, latency median and p90."""
    cats = sorted({c for r in runs for c in r.by_category})
    head = ["run", *cats, "overall", "judged", "dropped", "latency median (s)", "latency p90 (s)", "took turn"]
    body = []
    for r in runs:
        lat = r.latencies
        body.append([r.model, *[f"{statistics.mean(r.by_category[c]):.2f}" if r.by_category.get(c) else "-" for c in cats],
                     f"{r.overall:.2f}" if r.overall is not None else "-", str(len(r.scores)),
                     ", ".join(f"{k} {v}" for k, v in sorted(r.dropped.items())) or "0",
                     f"{statistics.median(lat):.2f}" if lat else "-", f"{percentile(lat, 0.9):.2f}" if lat else "-",
                     f"{sum(r.took_turn) / len(r.took_turn):.0%}" if r.took_turn else "-"])
    for name, score, latency in PAPER:
        body.append([name, *["" for _ in cats], f"{score:.2f}", "", "", f"{latency:.1f}" if latency else "", "", ""])
    return head, body


def findings_table(runs: list[RunScores]) -> tuple[list[str], list[list[str]]]:
    """Per model and category, the turns of each finding (FINDINGS): what FastChat scores as it reads it."""
    head = ["run", "category", *[f.replace("_", " ") for f in FINDINGS]]
    body = [[r.model, c, *[str(r.findings[c].get(f, 0)) for f in FINDINGS]]
            for r in runs for c in sorted(r.findings) if any(r.findings[c].values())]
    return head, body


def _md(head: list[str], body: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(row) + " |" for row in body]


def markdown(runs: list[RunScores], references: str = "") -> str:
    head, body = table(runs)
    judge = runs[0].judge if runs else ""
    text = (f"Judge: `{judge}` (1-10, single-answer grading, scored as FastChat's llm_judge scores: every answer "
            "judged, the first [[N]] or else [N] taken as written; the mean leaves out only score -1). Paper rows: the "
            "KAME paper's published overall scores, from its own judge: a shape to compare with, not the same scale.")
    if references:
        text += f" Reference answers: {references}."
    lines = [text, "", *_md(head, body)]
    fhead, fbody = findings_table(runs)
    if fbody:
        lines += ["", "Counted, not changing the score (turns): empty answers and silent ones (the model never took "
                  "the turn) are judged like any other; ratings a stricter reading would refuse are kept as FastChat "
                  "reads them.", "", *_md(fhead, fbody)]
    return "\n".join(lines) + "\n"


def plot(runs: list[RunScores], path: Path) -> Path:
    """Overall score against the run's oracle latency; runs without one (oracle none) as level lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    timed = sorted((r.oracle_latency, r.overall, r.model) for r in runs
                   if r.oracle_latency is not None and r.overall is not None)
    if timed:
        ax.plot([t[0] for t in timed], [t[1] for t in timed], "o-", label="with the oracle")
        for x, y, name in timed:
            ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    for r in runs:
        if r.oracle_latency is None and r.overall is not None:
            ax.axhline(r.overall, linestyle="--", color="grey")
            ax.annotate(r.model, (0, r.overall), textcoords="offset points", xytext=(2, 3), fontsize=7)
    ax.set_xlabel("oracle latency (s)")
    ax.set_ylabel(f"MT-Bench score ({runs[0].judge if runs else 'judge'})")
    ax.set_ylim(0, 10)
    ax.grid(alpha=0.3)
    if timed:
        ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic.atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return path


def write_report(runs: list[RunScores], out: Path, references: str = "") -> dict[str, Path]:
    """OUT/report.md, OUT/score_vs_latency.png and OUT/report.html (the table and the plot).
    `references`: which reference answers the judge saw (the judge's sidecar, `judge_meta`)."""
    if not runs:
        raise ReportError("no judgments to report")
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(runs, references)
    atomic.write_text(out / "report.md", md)
    png = plot(runs, out / "score_vs_latency.png")
    head, body = table(runs)
    fhead, fbody = findings_table(runs)
    cells = lambda row, tag: "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in row)  # noqa: E731
    rows = "\n".join(f"<tr>{cells(r, 'td')}</tr>" for r in body)
    img = base64.b64encode(png.read_bytes()).decode("ascii")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>kame-data eval report</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child{text-align:left}</style>"
            f"</head><body><h1>Spoken MT-Bench</h1><p>Judge: <code>{html.escape(runs[0].judge)}</code>. "
            "Paper rows are the KAME paper's published overall scores from its own judge.</p>"
            f"<table><tr>{cells(head, 'th')}</tr>\n{rows}</table>"
            + (f"<p>Reference answers: {html.escape(references)}.</p>" if references else "")
            + (f"<h2>Counted, not changing the score (turns)</h2><table><tr>{cells(fhead, 'th')}</tr>\n"
               + "\n".join(f"<tr>{cells(r, 'td')}</tr>" for r in fbody) + "</table>" if fbody else "")
            + 
            f"<h2>Score against oracle latency</h2><img alt='score against oracle latency' "
            f"src='data:image/png;base64,{img}'></body></html>\n")
    atomic.write_text(out / "report.html", page)
    return {"markdown": out / "report.md", "png": png, "html": out / "report.html"}


def meta_path(judgments: Path) -> Path:
    """The sidecar `eval judge` writes beside a judgment file: the judge's settings FastChat's rows
    have no field for (which reference answers it saw, strict ratings or not)."""
    return Path(judgments).with_suffix(".meta.json")


def references_said(metas: list[dict[str, Any]]) -> str:
    """One phrase for the report: which reference answers the judge saw, and for how many judgments."""
    parts = []
    for m in metas:
        r = m.get("references") or {}
        used = r.get("used") or {}
        said = [f"{r.get('file', 'a reference file')} for {used['file']}" if used.get("file") else "",
                f"the question file's reference field (the fallback) for {used['question_file']}"
                if used.get("question_file") else ""]
        parts += [p for p in said if p]
    return "; ".join(dict.fromkeys(parts)) + (" judgments" if parts else "")

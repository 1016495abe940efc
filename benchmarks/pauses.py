"""Pauses inside turns (issue 19) through the path a user runs, against a baseline in the same run.

The quickstart's dialogues are rendered twice with `kame-data run --until speak`: with the engines'
own pauses (`speak.pauses.bound: false`, the baseline) and with pauses kept under the oracle's run
rule (the default). For each, over every pair of neighbouring words inside a turn: how many end
1.0 s or more apart, the largest such gap, the oracle events of docs/design.md's ladder over the rendered
words (interval 0.5 s, the assistant's channel) and how many of them are level 5 inside a user turn
(the true reply before the user has finished; the LLM's predictions play no part in this), the
spread of the pauses (natural and varied, not clipped to one value), the dialogues rendered,
rejected or re-rendered faster, and the speak time (what keeping the rule costs).

    python benchmarks/pauses.py [--recipe quickstart] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "kame_data.cli.main"]
RULE = 1.0


def render(recipe: Path, raw: dict, pauses: dict, early: str, out: Path, limit: int | None) -> tuple[float, list[dict]]:
    raw = json.loads(json.dumps(raw))
    for s in raw["sources"]:
        if s.get("path"):
            s["path"] = str((recipe.parent / s["path"]).resolve())
    raw.setdefault("speak", {})["pauses"] = pauses
    raw.setdefault("oracle", {})["early_truth"] = early
    path = out.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(raw), "utf-8")
    t = time.perf_counter()
    r = subprocess.run(CLI + ["run", str(path), "--out", str(out), "--until", "speak", "-q", "--no-cache"]
                       + (["--limit", str(limit)] if limit else []), capture_output=True, text=True,
                       env=os.environ.copy())
    if r.returncode != 0:
        raise SystemExit(f"kame-data run failed:\n{r.stderr[-3000:]}")
    seconds = time.perf_counter() - t
    rendered = [json.loads(line) for line in (out / "rendered.jsonl").read_text("utf-8").splitlines()]
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text("utf-8").splitlines()]
    return seconds, rendered + [{"reject": r} for r in rejects if r["stage"] == "speak"]


def figures(records: list[dict], pool: set[str]) -> dict:
    """`pool`: the labels of the recipe's voices (a turn with another label was spoken faster)."""
    from kame_data.oracle.ladder import ladder
    from kame_data.oracle.metrics import early_truth
    from kame_data.records import Word

    gaps, pauses, sentence, faster = [], [], [], 0
    events = early = early_dialogues = 0
    for d in (r for r in records if "reject" not in r):
        steps = ladder([Word(**w) for w in d["words"]], 0.5, target_channel=0)
        found = early_truth([{"timestamp_ms": s.timestamp_ms, "level": s.level, "channel": s.channel} for s in steps],
                            [{"speaker": t["speaker"], **tm} for t, tm in zip(d["turns"], d["timings"])])
        events, early, early_dialogues = events + len(steps), early + len(found), early_dialogues + bool(found)
        for turn, timing in zip(d["turns"], d["timings"]):
            faster += timing["voice"] not in pool
            words = [w for w in d["words"] if w["speaker"] == turn["speaker"]
                     and timing["start"] <= w["start"] and w["end"] <= timing["end"]]
            text = turn["spoken"]
            for a, b in zip(words, words[1:]):
                gaps.append(b["end"] - a["end"])
                pause = b["start"] - a["end"]
                if pause > 0.15:
                    pauses.append(pause)
                    # a sentence pause: the spoken text has a full stop or question mark between the words
                    if f"{a['word']}. {b['word']}" in text or f"{a['word']}? {b['word']}" in text:
                        sentence.append(pause)
    deciles = lambda xs: [round(x, 2) for x in statistics.quantiles(xs, n=10)] if len(xs) > 2 else xs  # noqa: E731
    return {"dialogues": sum("reject" not in r for r in records),
            "rejected": [r["reject"]["reason"] for r in records if "reject" in r],
            "turns_spoken_faster": faster, "word_pairs": len(gaps),
            "oracle_events": events, "level5_inside_a_user_turn": early, "dialogues_with_them": early_dialogues,
            "gaps_at_or_over_rule": sum(g >= RULE for g in gaps), "max_end_gap_s": round(max(gaps), 3),
            "pauses_over_0.15s": len(pauses), "pause_deciles_s": deciles(pauses),
            "sentence_pauses": len(sentence), "sentence_pause_deciles_s": deciles(sentence)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default="quickstart")
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from kame_data.recipe import find_recipe
    from kame_data.speech.config import SpeakConfig

    recipe = find_recipe(args.recipe)
    raw = yaml.safe_load(recipe.read_text("utf-8"))
    speak = raw.get("speak") or {}
    pool = {v.label for v in SpeakConfig(**{k: speak[k] for k in ("assistant", "user") if k in speak}).voices}
    with tempfile.TemporaryDirectory() as tmp:
        base_s, base = render(recipe, raw, {"bound": False}, "keep", Path(tmp) / "engine_pauses", args.limit)
        rule_s, rule = render(recipe, raw, {}, "reject", Path(tmp) / "bounded", args.limit)
    print(f"recipe {args.recipe}: speak ({'--limit ' + str(args.limit) if args.limit else 'every item'}), "
          f"{os.cpu_count()} cores")
    for name, seconds, records in (("engine pauses (baseline)", base_s, base), ("under the run rule", rule_s, rule)):
        print(f"\n{name}: kame-data run --until speak in {seconds:.0f} s")
        for k, v in figures(records, pool).items():
            print(f"  {k}: {v}")
    print(f"\nspeak time with the rule / baseline: {rule_s / base_s:.2f}")


if __name__ == "__main__":
    main()
